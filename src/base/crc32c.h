// base/crc32c.h: CRC-32C (Castagnoli, the polynomial of iSCSI, ext4 and SSE 4.2's crc32 instruction), to tell a
// file that was damaged or cut short from one written whole.
//
//   const std::uint32_t sum = crc32c(bytes);
//   const std::uint32_t same = crc32c(tail, crc32c(head));   // in pieces, the same answer
//
// The check value of "123456789" is 0xE3069283. Uses the crc32 instruction where the processor has it.
#pragma once

#include <cstdint>
#include <string_view>

namespace rk::base {

std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0);

}  // namespace rk::base
