#include "tests/fuzz/fuzz_input.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace pstrain {

const std::string& FuzzScratchDir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    auto* path = new std::string(
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/pstrain-fuzz-", ::getpid()));
    std::filesystem::create_directories(*path);
    return path;
  }();
  return *dir;
}

std::string WriteFuzzFile(const std::string& name, absl::string_view bytes) {
  const std::string path = absl::StrCat(FuzzScratchDir(), "/", name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

void SplitFuzzInput(absl::string_view data, int parts, std::string* out) {
  constexpr absl::string_view kSeparator = "\n--\n";
  for (int i = 0; i < parts; ++i) {
    const size_t at = i + 1 < parts ? data.find(kSeparator) : absl::string_view::npos;
    if (at == absl::string_view::npos) {
      out[i] = std::string(data);
      data = absl::string_view();
    } else {
      out[i] = std::string(data.substr(0, at));
      data.remove_prefix(at + kSeparator.size());
    }
  }
}

}  // namespace pstrain
