/* Error names and strings, shared by the simulated driver and runtime (each links its own copy). */
#ifndef SIMCUDA_ERRORS_H
#define SIMCUDA_ERRORS_H

/* NULL when the code has no name on that side. */
const char *simcuda_drv_error_name(int code);
const char *simcuda_rt_error_name(int code);
const char *simcuda_error_string(int code);

#endif
