"""The ways nibble.torch quantizes and multiplies, one module per backend family:
  reference  nibble's CPU reference through nibble._C (bit-exact to the C++ recipes)
  emulated   the same rules as torch ops (emulate: the formats' arithmetic), on any device
  quartet, fp8, mxfp4, decoded
             CUDA tensors on nibble's own kernels and cuBLASLt (the CUDA build of nibble._C), each with
             its own autograd function; common holds the tails they share.
Imports run one way: nibble.torch -> backends -> nibble._ext / nibble.seeds; within backends,
mxfp4 -> quartet -> common and emulated -> emulate.
"""
