# In the Tally checkout: build the client and pack it (the tarball holds dist/, nothing else to build)
cd clients/typescript && npm ci && npm pack --pack-destination /tmp
# In your app: install the tarball (a copy, not a link into the checkout)
npm install /tmp/tally-client-0.1.0.tgz
