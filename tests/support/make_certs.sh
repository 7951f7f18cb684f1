#!/bin/sh
# tests/support/make_certs.sh DIR: the certificates the TLS tests use, made fresh in DIR by the openssl command (P-256
# keys: quick to make on a busy machine), valid for two days:
#   ca.crt               the CA that issued server.crt and client.crt
#   server.crt/.key      the server's, subjectAltName IP:127.0.0.1 and DNS:localhost, serial 1
#   client.crt/.key      a client's, for mutual TLS
#   other-ca.crt         another CA, and other.crt/.key, a client's certificate it issued (untrusted by the server)
#   stranger.crt/.key    a client's from ca, subjectAltName DNS:stranger (a SAN check that wants "client" refuses it)
# tests/support/make_certs.sh DIR server SERIAL [CA]: a new server key and certificate (serial SERIAL) from ca (or from
# CA: other-ca), as a certificate manager rotates them: each file written aside and renamed over the old one.
set -eu
cd "$1"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "/CN=$1" -days 2 -out "$1.crt" 2>/dev/null
}

# leaf NAME CA SERIAL SUBJECT_ALT_NAME
leaf() {
  key "$1.key.new"
  openssl req -new -key "$1.key.new" -subj "/CN=$1" -out "$1.csr" 2>/dev/null
  printf 'subjectAltName=%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -set_serial "$3" -days 2 -extfile "$1.ext" \
    -out "$1.crt.new" 2>/dev/null
  rm "$1.csr" "$1.ext"
  mv "$1.key.new" "$1.key"
  mv "$1.crt.new" "$1.crt"
}

if [ "${2:-}" = server ]; then
  leaf server "${4:-ca}" "$3" "IP:127.0.0.1,DNS:localhost"
  exit 0
fi
ca ca
ca other-ca
leaf server ca 1 "IP:127.0.0.1,DNS:localhost"
leaf client ca 2 "DNS:client"
leaf other other-ca 3 "DNS:other"
leaf stranger ca 4 "DNS:stranger"
