// psctl: looks at a running pstrain job from a shell. See tools/psctl_lib.h.
//
//   psctl status --chief=HOST:PORT     phase, epoch, step, tasks and variable layout
//   psctl layout --chief=HOST:PORT     which ps holds which rows of each variable
//   psctl ps --address=HOST:PORT       a ps task's variables, versions and counters
//   psctl checkpoint --chief=HOST:PORT the chief writes a checkpoint now (prints its path)
//   psctl status --watch ...            the status again every --interval until the job ends
//   --json                             any command's answer as one line of JSON
//
// Exit codes: 0 done, 1 a task did not answer (named), 2 bad usage.

#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "tools/psctl_lib.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return pstrain::RunPsctl(args, std::cout, std::cerr, isatty(STDOUT_FILENO) == 1);
}
