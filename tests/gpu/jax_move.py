#!/usr/bin/env python3
"""JAX moving an array from GPU 0 to GPU 1."""
import jax
import jax.numpy as jnp

devs = jax.devices("gpu")
x = jax.device_put(jnp.arange(1 << 20, dtype=jnp.float32), devs[0])
y = jax.device_put(x, devs[1])
y.block_until_ready()
ok = bool((jax.device_get(y) == jax.device_get(x)).all())
print("JAX devices=%d moved_bytes=%d correct=%s" % (len(devs), 4 << 20, ok))
