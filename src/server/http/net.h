// server/http/net.h (internal): the Asio names and the clock that the server's internal headers share.
//
// Only the library's own files include this: server.h exposes neither Asio nor Beast.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>

namespace rk::server::http::detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;  // every deadline: timeouts, lingering, the sweep

}  // namespace rk::server::http::detail
