#!/bin/sh
# tests/support/make_redis_certs.sh DIR: the certificates the TLS tests use, made with openssl in DIR (fast EC keys):
#   ca.crt                  the CA the client trusts (--redis-tls-ca) and Redis checks client certificates with
#   server.crt, server.key  Redis's: for 127.0.0.1, localhost and this machine's name
#   client.crt, client.key  the client's, for mutual TLS
#   expired.crt             Redis's key, expired yesterday
#   wrong-name.crt          Redis's key, for wrong.example only
#   other-ca.crt            a CA that signed none of them
set -eu
d=$1
mkdir -p "$d"
cd "$d"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 2 -subj "/CN=ratekeeper test $1" 2>/dev/null
}
# sign NAME KEY DAYS EXTENSIONS: a certificate for KEY signed by ca
sign() {
  openssl req -new -key "$2" -subj "/CN=$1" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$3" -extfile "$1.ext" \
    -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca
ca other-ca
key server.key
key client.key
sign server server.key 2 "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:$(hostname)"
sign client client.key 2 "extendedKeyUsage=clientAuth"
sign expired server.key -1 "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:$(hostname)"
sign wrong-name server.key 2 "subjectAltName=DNS:wrong.example"
chmod 644 ./*.key
