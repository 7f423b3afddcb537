#ifndef VEIL_COPENSSL_H
#define VEIL_COPENSSL_H
/* OpenSSL's libcrypto (the library GStreamer's DTLS elements use): the per-connection DTLS
   certificate of a call (VeilCall/DTLSCertificate.swift), and the check that the room server's
   TLS key belongs to its certificate (VeilServer/ServerCertificate.swift). */
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#endif
