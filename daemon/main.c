/* main: command line entry point of kctrld. Loop thread only. */
#include <stdio.h>
#include <string.h>

#include "log.h"

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--version") == 0) {
      printf("kctrld %s\n", KCTRLD_VERSION);
      return 0;
    }
  }
  kc_error("main", "usage: kctrld --config FILE [--kubeconfig FILE] [--metrics-bind-address HOST:PORT] [--identity NAME]");
  return 2;
}
