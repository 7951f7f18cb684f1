// fuzz/replay_main.cc: runs a fuzz target's entry point over files, without libFuzzer, so that the seed corpus and
// every input that once crashed (fuzz/regressions/<target>/) are replayed as a test in the ordinary builds, under
// the sanitizers of whichever preset built them.
//
//   fuzz_trace_replay fuzz/corpus/trace fuzz/regressions/trace   # directories (their files) or files
//
// Exits 0 after running every input; a crash is the sanitizer's or the process's own. Fails if it found no input
// at all, so that a wrong path cannot pass for a green test. Files whose names start with '.' are skipped.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    return false;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A copy in a buffer of its own size, so that ASan catches a read one past the end as libFuzzer would.
  std::vector<std::uint8_t> buf(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(buf.empty() ? nullptr : buf.data(), buf.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::size_t ran = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(arg, ec)) {
        if (entry.is_regular_file(ec) && entry.path().filename().string().front() != '.') files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        ok = run_file(f) && ok;
        ++ran;
      }
    } else if (fs::is_regular_file(arg, ec)) {
      ok = run_file(arg) && ok;
      ++ran;
    } else {
      std::fprintf(stderr, "%s: neither a file nor a directory (skipped)\n", argv[i]);
    }
  }
  std::printf("replayed %zu inputs\n", ran);
  if (ran == 0) {
    std::fprintf(stderr, "no input found: nothing was tested\n");
    return 1;
  }
  return ok ? 0 : 1;
}
