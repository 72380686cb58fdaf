/* SPDX-License-Identifier: MIT */
/*
 * A C extension module that calls the CUDA runtime the way PyTorch does: it releases the GIL around
 * the call (Py_BEGIN_ALLOW_THREADS), so the guard sees a Python thread that does not hold it.
 *
 *   import gil_release
 *   gil_release.enable_peer_access(device, peer) -> the runtime's status
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda_runtime_api.h>

static PyObject *enable_peer_access(PyObject *self, PyObject *args)
{
	int device, peer;
	if (!PyArg_ParseTuple(args, "ii", &device, &peer))
		return NULL;
	cudaError_t rc;
	Py_BEGIN_ALLOW_THREADS rc = cudaSetDevice(device);
	if (rc == cudaSuccess)
		rc = cudaDeviceEnablePeerAccess(peer, 0);
	cudaGetLastError();
	Py_END_ALLOW_THREADS return PyLong_FromLong((long)rc);
}

static PyMethodDef methods[] = {
    {"enable_peer_access", enable_peer_access, METH_VARARGS,
     "cudaDeviceEnablePeerAccess(peer) on device, with the GIL released"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "gil_release",
    "CUDA calls with the GIL released",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit_gil_release(void); /* what the import system looks up */

PyMODINIT_FUNC PyInit_gil_release(void)
{
	return PyModule_Create(&module);
}
