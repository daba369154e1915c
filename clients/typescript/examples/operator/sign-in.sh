# Sign in as that administrator: the session cookie lands in admin.cookies
curl -sf -c admin.cookies -o /dev/null -X POST "$TALLY_URL/api/auth/login" \
  -H 'content-type: application/json' \
  -d "{\"email\":\"ops@example.com\",\"password\":\"$TALLY_PASSWORD\"}"
