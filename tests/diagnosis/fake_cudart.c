/* SPDX-License-Identifier: MIT */
/*
 * The one runtime call the evidence gatherer makes, in a library the test loads by path with
 * RTLD_GLOBAL, as a program's libcudart would be. Named so that nothing loads it by accident.
 */
#define FAKE_API __attribute__((visibility("default")))

FAKE_API int cudaRuntimeGetVersion(int *version);

int cudaRuntimeGetVersion(int *version)
{
	if (!version)
		return 1; /* cudaErrorInvalidValue */
	*version = 12080;
	return 0;
}
