"""SINGA's adaptive optimizers: ``opt.Adam``, ``opt.RMSProp`` and ``opt.AdaGrad``.

Each is a core ``nn`` optimizer rule (a subclass of the core ``Optimizer`` that only writes
``_apply_one``, the per-parameter update on the device's array module) behind SINGA's
constructor. The rules are SINGA's, with the L2 term ``g += weight_decay * p`` first:

* ``RMSProp(lr=0.1, rho=0.9, epsilon=1e-8, weight_decay=0)``:
  ``r = rho * r + (1 - rho) * g²``; ``p -= lr * g / sqrt(r + epsilon)``.
* ``AdaGrad(lr=0.1, epsilon=1e-8, weight_decay=0)``:
  ``h += g²``; ``p -= lr * g / sqrt(h + epsilon)``.
* ``Adam(lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0)``:
  ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g²``, step ``t`` from 1;
  ``p -= lr * m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + epsilon)`` (``torch.optim.Adam``).

>>> from minitorch_dist.singa import opt
>>> opt.Adam(lr=0.01).beta_1, opt.RMSProp().rho, opt.AdaGrad().epsilon
(0.9, 0.9, 1e-08)
"""
from ..nn.optim.optimizer import Optimizer as CoreOptimizer

__all__ = ["RMSPropRule", "AdaGradRule", "AdamRule"]


def _decayed(xp, param, grad, weight_decay, inv_scale, out):
    """``out = grad * inv_scale + weight_decay * param``."""
    xp.multiply(grad, inv_scale, out=out)
    if weight_decay:
        out += weight_decay * param
    return out


def _root_scaled_step(xp, param, g, accumulated, epsilon, lr, tmp):
    """``param -= lr * g / sqrt(accumulated + epsilon)``, through ``tmp`` (RMSProp, AdaGrad)."""
    xp.add(accumulated, epsilon, out=tmp)
    xp.sqrt(tmp, out=tmp)
    xp.divide(g, tmp, out=tmp)
    tmp *= lr
    param -= tmp


class RMSPropRule(CoreOptimizer):
    """SINGA's RMSProp update as a core optimizer."""

    def __init__(self, params, learning_rate, rho, epsilon, weight_decay):
        super().__init__(learning_rate, params, weight_decay)
        self.rho, self.epsilon = float(rho), float(epsilon)
        self._add_slots("running_average")

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        xp = device.xp
        g, tmp = self._scratch(i, device, param, 2)
        _decayed(xp, param, grad, weight_decay, self._inv_scale, g)
        r = self._slot("running_average", i, device)
        r *= self.rho
        xp.multiply(g, g, out=tmp)
        tmp *= 1.0 - self.rho
        r += tmp
        _root_scaled_step(xp, param, g, r, self.epsilon, lr, tmp)


class AdaGradRule(CoreOptimizer):
    """SINGA's AdaGrad update as a core optimizer."""

    def __init__(self, params, learning_rate, epsilon, weight_decay):
        super().__init__(learning_rate, params, weight_decay)
        self.epsilon = float(epsilon)
        self._add_slots("history")

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        xp = device.xp
        g, tmp = self._scratch(i, device, param, 2)
        _decayed(xp, param, grad, weight_decay, self._inv_scale, g)
        h = self._slot("history", i, device)
        xp.multiply(g, g, out=tmp)
        h += tmp
        _root_scaled_step(xp, param, g, h, self.epsilon, lr, tmp)


class AdamRule(CoreOptimizer):
    """SINGA's Adam update (bias-corrected, epsilon outside the root) as a core optimizer."""

    def __init__(self, params, learning_rate, beta_1, beta_2, epsilon, weight_decay):
        super().__init__(learning_rate, params, weight_decay)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)
        self._add_slots("m")
        self._add_slots("v")

    def _apply_one(self, i, param, grad, lr, weight_decay, step, device):
        xp = device.xp
        g, tmp = self._scratch(i, device, param, 2)
        _decayed(xp, param, grad, weight_decay, self._inv_scale, g)
        m, v = self._slot("m", i, device), self._slot("v", i, device)
        t = step + 1
        m *= self.beta_1
        m += (1.0 - self.beta_1) * g
        v *= self.beta_2
        xp.multiply(g, g, out=tmp)
        tmp *= 1.0 - self.beta_2
        v += tmp
        xp.divide(v, 1.0 - self.beta_2 ** t, out=tmp)
        xp.sqrt(tmp, out=tmp)
        tmp += self.epsilon
        xp.divide(m, tmp, out=tmp)
        tmp *= lr / (1.0 - self.beta_1 ** t)
        param -= tmp
