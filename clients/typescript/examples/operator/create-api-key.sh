# The key for your app's backend: the answer's "secret" (tly_…) is shown this once,
# keep it as TALLY_API_KEY in your app's server environment
curl -sf -b admin.cookies -X POST "$TALLY_URL/api/admin/api-keys" \
  -H 'content-type: application/json' \
  -d '{"name":"app backend","scopes":["credits:consume","credits:read","entitlements:read","events:read","billing:read","billing:write"]}'
