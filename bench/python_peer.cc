#include "bench/python_peer.h"

#include <unistd.h>

#include <cstdio>

namespace pstrain {

std::string FindPeerScript(const std::string& flag, const std::string& relative,
                           const char* argv0) {
  if (!flag.empty()) return flag;
  for (const std::string& path :
       {relative, std::string(argv0) + ".runfiles/pstrain/" + relative}) {
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return "";
}

bool RunPeer(const std::string& command, const std::function<bool(const char* line)>& parse) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return false;
  char line[512];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    if (!parse(line)) std::printf("  %s", line);
  }
  pclose(pipe);
  return true;
}

}  // namespace pstrain
