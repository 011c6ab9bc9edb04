"""Unit tests run with one BLAS thread: small solves are several times faster so on 2 cores."""

from threadpoolctl import threadpool_limits

threadpool_limits(1)
