#include "server/grpc/log_routing.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "logging/log.h"

namespace rk::server::grpc {

namespace {

// "ssl_transport_security.cc:1501": where in the library the line comes from, its event.
std::string source_line(const char* file, int line) {
  std::string_view f = file ? file : "?";
  if (const auto slash = f.rfind('/'); slash != std::string_view::npos) f.remove_prefix(slash + 1);
  return std::string(f) + ":" + std::to_string(line);
}

void write(std::string_view library, logging::Level level, const char* file, int line, std::string_view message) {
  try {
    const std::string at = source_line(file, line);
    logging::log_event(level, std::string(library) + " " + at, message, {{"source", std::string(library)}, {"at", at}});
  } catch (...) {  // called from C; a line lost rather than the process
  }
}

void from_grpc(gpr_log_func_args* args) {
  const logging::Level level = args->severity == GPR_LOG_SEVERITY_ERROR  ? logging::Level::kError
                               : args->severity == GPR_LOG_SEVERITY_INFO ? logging::Level::kInfo
                                                                         : logging::Level::kDebug;
  write("grpc", level, args->file, args->line, args->message ? args->message : "");
}

void from_protobuf(google::protobuf::LogLevel severity, const char* file, int line, const std::string& message) {
  write("protobuf", severity == google::protobuf::LOGLEVEL_INFO ? logging::Level::kInfo : logging::Level::kError, file,
        line, message);
}

}  // namespace

void route_grpc_logs() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!std::getenv("GRPC_VERBOSITY")) gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
    gpr_set_log_function(from_grpc);
    google::protobuf::SetLogHandler(from_protobuf);
  });
}

}  // namespace rk::server::grpc
