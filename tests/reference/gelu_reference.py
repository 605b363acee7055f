#!/usr/bin/env python3
"""Reference values of GELU for tests/test_reference_elementwise.cpp.

Computed with mpmath at 50 significant digits, independently of sinklab:
  exact GELU   gelu(x)  = x * Phi(x),  Phi(x) = erfc(-x / sqrt(2)) / 2
  derivative   gelu'(x) = Phi(x) + x * phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
  tanh approx  gelu_tanh(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
The tanh form is printed only so that the test can show the library uses the exact (erf) form.
Run:  python3 tests/reference/gelu_reference.py   (needs mpmath)
"""
import mpmath as mp

mp.mp.dps = 50
xs = ["-1e4", "-30", "-10", "-5", "-3", "-2", "-1.5", "-1", "-0.5", "-1e-3", "0", "2e-3",
      "0.5", "1", "1.5", "2", "3", "5", "10", "40", "1e4"]


def Phi(x):
    return mp.erfc(-x / mp.sqrt(2)) / 2


def phi(x):
    return mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)


def fmt(v):
    # values below the double range (gelu(-1e4) ~ -3e-21714725) print as 0
    return "0.0" if abs(v) < mp.mpf("1e-300") else mp.nstr(v, 17, min_fixed=-5, max_fixed=5)


print("// x, gelu(x), gelu'(x), gelu_tanh(x)")
for s in xs:
    x = mp.mpf(s)
    g = x * Phi(x)
    dg = Phi(x) + x * phi(x)
    gt = x / 2 * (1 + mp.tanh(mp.sqrt(2 / mp.pi) * (x + mp.mpf("0.044715") * x ** 3)))
    print("{%s, %s, %s, %s}," % (s, fmt(g), fmt(dg), fmt(gt)))
