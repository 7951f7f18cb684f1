// tests/support/certs.h: a temporary directory of the TLS tests' certificates (tests/support/make_certs.sh, whose
// path the test binary is given as RK_MAKE_CERTS), removed at the end.
//
//   Certs certs;
//   certs("server.crt");            // a file's path
//   certs.rotate_server(2);         // a new server key and certificate, serial 2, each renamed over the old one
//   certs.make_server_aside(2);     // the same under certs.aside(), the files in use untouched
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace rk::tests {

class Certs {
 public:
  Certs() {
    char tmpl[] = "/tmp/rk-tls-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    run(dir_, "");
  }
  ~Certs() { std::filesystem::remove_all(dir_); }
  Certs(const Certs&) = delete;
  Certs& operator=(const Certs&) = delete;

  std::string operator()(const std::string& name) const { return dir_ + "/" + name; }
  void rotate_server(int serial) const { run(dir_, " server " + std::to_string(serial)); }
  // A server key and certificate (serial `serial`, from the CA `ca`: "ca" or "other-ca") made in aside(), for a
  // test to move into place one file at a time.
  void make_server_aside(int serial, const std::string& ca) const {
    std::filesystem::create_directories(aside());
    for (const char* name : {"ca.crt", "ca.key", "other-ca.crt", "other-ca.key"}) {
      std::filesystem::copy_file((*this)(name), aside() + "/" + name,
                                 std::filesystem::copy_options::overwrite_existing);
    }
    run(aside(), " server " + std::to_string(serial) + " " + ca);
  }
  std::string aside() const { return dir_ + "/aside"; }

 private:
  static void run(const std::string& dir, const std::string& args) {
    const std::string command = std::string("sh ") + RK_MAKE_CERTS + " " + dir + args;
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  std::string dir_;
};

}  // namespace rk::tests
