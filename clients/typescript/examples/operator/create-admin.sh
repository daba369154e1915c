# Once, on the server: the first administrator (password from TALLY_PASSWORD, or typed on stdin)
tally admin create-user --email ops@example.com --admin
