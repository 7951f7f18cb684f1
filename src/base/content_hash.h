// base/content_hash.h: a short name for any text, the same in every process and version: FNV-1a 64 as 16 hex
// digits.
//
//   content_hash("")  -> "cbf29ce484222325"      content_hash("a") -> "af63dc4c8601ec8c"
//
// Not keyed, so not for what an attacker may choose to collide (store/memory/key_digest.h is): it names rules by
// their identity, rule sets by their files, the Redis functions by their scripts, and Redis keys' Cluster hash tags
// (where a value's own "{...}" must not choose the slot).
#pragma once

#include <string>
#include <string_view>

namespace rk::base {

std::string content_hash(std::string_view text);

}  // namespace rk::base
