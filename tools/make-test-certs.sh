#!/usr/bin/env bash
# Regenerates the test PKI in Tests/BraidTests/Fixtures with GnuTLS's certtool.
# The fixtures are committed so tests are deterministic; rerun this only to change them.
#   ca.pem / ca-key.pem           trusted test CA
#   server.pem / server-key.pem   localhost, 127.0.0.1, ::1 — signed by the trusted CA
#   wrong-name.pem / -key.pem     wrong.example — signed by the trusted CA
#   other-ca.pem                  an unrelated CA
#   untrusted.pem / -key.pem      localhost — signed by the unrelated CA
#   client.pem / client-key.pem   a TLS client certificate (mutual TLS) — signed by the trusted CA
#   untrusted-client.pem / -key   a TLS client certificate signed by the unrelated CA
#   example.pem / example-key.pem www.example.com — signed by the trusted CA (README examples)
set -euo pipefail
out="${1:-$(dirname "$0")/../Tests/BraidTests/Fixtures}"
mkdir -p "$out"
cd "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

key() { certtool --generate-privkey --key-type=ecdsa --curve=secp256r1 --outfile "$1" 2>/dev/null; }

ca() { # name keyfile certfile
  printf 'cn = "%s"\nca\ncert_signing_key\nexpiration_days = 36500\n' "$1" >"$tmp/ca.tmpl"
  key "$2"
  certtool --generate-self-signed --load-privkey "$2" --template "$tmp/ca.tmpl" --outfile "$3" 2>/dev/null
}

leaf() { # cn cakey cacert keyfile certfile san-lines...  (PURPOSE=tls_www_client for clients)
  local cn=$1 cakey=$2 cacert=$3 k=$4 c=$5; shift 5
  { printf 'cn = "%s"\n%s\nsigning_key\nencryption_key\nexpiration_days = 36500\n' "$cn" "${PURPOSE:-tls_www_server}"
    for san in "$@"; do printf '%s\n' "$san"; done; } >"$tmp/leaf.tmpl"
  key "$k"
  certtool --generate-certificate --load-privkey "$k" --load-ca-privkey "$cakey" \
    --load-ca-certificate "$cacert" --template "$tmp/leaf.tmpl" --outfile "$c" 2>/dev/null
}

ca "Braid Test CA" ca-key.pem ca.pem
ca "Unrelated Test CA" "$tmp/other-ca-key.pem" other-ca.pem
leaf localhost ca-key.pem ca.pem server-key.pem server.pem \
  'dns_name = "localhost"' 'ip_address = "127.0.0.1"' 'ip_address = "::1"'
leaf wrong.example ca-key.pem ca.pem wrong-name-key.pem wrong-name.pem 'dns_name = "wrong.example"'
leaf localhost "$tmp/other-ca-key.pem" other-ca.pem untrusted-key.pem untrusted.pem \
  'dns_name = "localhost"' 'ip_address = "127.0.0.1"'
PURPOSE=tls_www_client leaf "Braid Test Client" ca-key.pem ca.pem client-key.pem client.pem
PURPOSE=tls_www_client leaf "Untrusted Test Client" "$tmp/other-ca-key.pem" other-ca.pem \
  untrusted-client-key.pem untrusted-client.pem
leaf www.example.com ca-key.pem ca.pem example-key.pem example.pem 'dns_name = "www.example.com"'
# Derived files the Security tests compare against, made once here so no test runs a tool:
# PKCS #12 bundles (passphrase "secret"), an RSA certificate, and the external key forms
# (EC: the uncompressed point, the SubjectPublicKeyInfo's last 65 bytes; RSA: PKCS #1) as
# OpenSSL writes them.
for name in server client; do
  openssl pkcs12 -export -in "$name.pem" -inkey "$name-key.pem" -passout pass:secret -out "$name.p12"
done
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=rsa.test -days 36500 -keyout rsa-key.pem -out rsa.pem 2>/dev/null
openssl x509 -in rsa.pem -pubkey -noout | openssl rsa -pubin -RSAPublicKey_out -outform DER -out rsa-public-pkcs1.der 2>/dev/null
openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform DER | tail -c 65 > server-public-point.der
echo "test certificates written to $out"
