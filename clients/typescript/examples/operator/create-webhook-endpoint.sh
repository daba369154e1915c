# Where Tally posts its events (every type unless "eventTypes" lists some); the answer's
# "secret" (whsec_…) is shown this once: keep it as TALLY_WEBHOOK_SECRET in your app
curl -sf -b admin.cookies -X POST "$TALLY_URL/api/admin/webhook-endpoints" \
  -H 'content-type: application/json' \
  -d "{\"url\":\"$APP_URL/api/tally/events\"}"
