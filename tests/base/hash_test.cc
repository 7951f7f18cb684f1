// The keys' hashes (base/hash.h): hash_key, which places keys in the in-process store's shards and slots
// and in the shared-memory region, and the SipHash-2-4-128 digests long keys are stored as.
#include "base/hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace rk::base {
namespace {

// The reference's key 00..0f; outputs from OpenSSL 3 (`openssl mac -macopt hexkey:000102...0f -macopt size:16
// SIPHASH`) over the bytes 00, 01, ... of each length, written as the two little-endian halves.
TEST(SipHash128, MatchesTheReferenceOutputs) {
  const DigestKey key{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
  auto message = [](std::size_t n) {
    std::string m(n, '\0');
    for (std::size_t i = 0; i < n; ++i) m[i] = static_cast<char>(i);
    return m;
  };
  struct Case {
    std::size_t length;
    std::uint64_t lo, hi;
  };
  for (const Case& c :
       {Case{0, 0xE6A825BA047F81A3ULL, 0x930255C71472F66DULL}, Case{15, 0x11A8B03399E99354ULL, 0xD9C3CF970FEC087EULL},
        Case{100, 0x3317BE09D02D7339ULL, 0xD9E6E58F35C69782ULL}}) {
    const Digest128 d = siphash128(message(c.length), key);
    EXPECT_EQ(d.lo, c.lo) << c.length << " bytes";
    EXPECT_EQ(d.hi, c.hi) << c.length << " bytes";
  }
}

TEST(ShardedStore, SeedChangesTheHash) {
  EXPECT_NE(hash_key("203.0.113.7", 1), hash_key("203.0.113.7", 2));
  EXPECT_EQ(hash_key("203.0.113.7", 1), hash_key("203.0.113.7", 1));
  EXPECT_NE(hash_key("", 1), hash_key(std::string_view("\0", 1), 1));
  EXPECT_NE(random_seed(), 0u);
}

// hash_key places keys in shards and slots here, and in the shared-memory store's region, which processes of
// different builds may share: its values are fixed (these are the first implementation's).
TEST(ShardedStore, HashValuesAreStableAcrossBuilds) {
  struct Case {
    std::string_view key;
    std::uint64_t hash;
  };
  for (const Case& c :
       {Case{"", 0x931C294366A22308ULL}, Case{"a", 0x6DA9F5047569D809ULL}, Case{"ab", 0x7AFB0F89A0B1AC2EULL},
        Case{"abc", 0xA95A1A4B77EEAA72ULL}, Case{"203.0.113.7", 0x9F34C24196B153FEULL},
        Case{"user:00000000042", 0x89A43C02075642B1ULL}, Case{"user:000000000042", 0x517FAEECAB9D2050ULL},
        Case{"api-key:0123456789abcdef0123456789abcdef:with/a/longer/path", 0xA47382F3DE380BBDULL}}) {
    EXPECT_EQ(hash_key(c.key, 0x0123456789ABCDEFULL), c.hash) << c.key;
    EXPECT_EQ(KeyHasher(0x0123456789ABCDEFULL)(c.key), c.hash) << c.key;  // the store's, with its precomputed start
  }
}

}  // namespace
}  // namespace rk::base
