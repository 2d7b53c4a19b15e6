/* Placeholder replaced by the simulator implementation (issue 3). */
#include <stdio.h>
int main(void) { fprintf(stderr, "kube-apisim: not built yet\n"); return 2; }
