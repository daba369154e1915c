# Refund 4.00 of an order (major units of its currency; omit "amount" for all that is left)
curl -sf -b admin.cookies -X POST "$TALLY_URL/api/admin/orders/$ORDER_ID/refund" \
  -H 'content-type: application/json' \
  -d '{"amount":"4.00","reason":"requested by the customer"}'
