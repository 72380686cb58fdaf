/* SPDX-License-Identifier: MIT */
#include "reentry.h"

__thread int p2pg_depth __attribute__((tls_model("initial-exec")));
