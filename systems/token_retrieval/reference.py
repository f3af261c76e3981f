"""A plain, un-batched float64 numpy version of the token-retrieval model's three-step algorithm, for tests.

It shares only the data draws with the engine (``draw_instance`` / ``draw_samples``, so both see
the same embeddings and samples); the forward pass materialises h_j = e_{x_j} + [j = l] z_trig as
written in task.py's docstring, and the gradients are written out by hand instead of taken by autograd:

  p = softmax(U Vm f),  dL/dVm = mean_n U^T (p_n - onehot(y_n)) f_n^T,
  g_f = Vm^T U^T (p - onehot(y)),  g_o = g_f (attention-only) or W1^T (g_phi * [W1 o > 0]),
  dL/ds_j = a_j (h_j . g_o - o . g_o),  dL/dW_KQ = mean_n (sum_j dL/ds_j h_j) z_EOS^T,
  where for centred features g_phi = g_f - mean_units(g_f).
"""
from __future__ import annotations

import numpy as np

from recallkit.systems.token_retrieval.task import draw_instance, draw_samples

CHUNK = 256


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


class ReferenceTokenRetrieval:
    def __init__(self, seed: int, V: int, d: int, L: int, N: int, n_eval: int, m: int | None = None, features: str = "relu"):
        if features not in ("relu", "relu_centred"):
            raise ValueError(f"the reference implements relu and relu_centred, not {features}")
        self.features = features
        inst = {k: v.double().numpy() if v.is_floating_point() else v.numpy() for k, v in draw_instance(seed, V, d, m).items()}
        self.E, self.U, self.z_trig, self.z_eos, self.perm = inst["E"], inst["U"], inst["z_trig"], inst["z_eos"], inst["perm"]
        self.W1 = inst.get("W1")
        self.train = [t.numpy() for t in draw_samples(seed, "train", N, V, L)]
        self.eval = [t.numpy() for t in draw_samples(seed, "eval", n_eval, V, L)]
        self.width = d if m is None else m

    def _hidden_states(self, tokens, positions):
        h = self.E[tokens].copy()  # [n, L, d]
        h[np.arange(len(tokens)), positions] += self.z_trig
        return h

    def _features(self, o):
        if self.W1 is None:
            return o, None
        pre = o @ self.W1.T
        phi = np.maximum(pre, 0.0)
        if self.features == "relu_centred":
            phi = phi - phi.mean(axis=1, keepdims=True)
        return phi, pre

    def pass_over(self, Vm, W, samples, need_grads: bool):
        """Accuracy, attention mass on l, and (optionally) the mean gradients wrt Vm and W."""
        tokens, positions = samples
        n = len(tokens)
        q = W @ self.z_eos
        correct, mass = 0, 0.0
        grad_V, grad_q = np.zeros_like(Vm), np.zeros_like(q)
        for start in range(0, n, CHUNK):
            tok, pos = tokens[start : start + CHUNK], positions[start : start + CHUNK]
            h = self._hidden_states(tok, pos)
            a = _softmax(h @ q)  # [c, L]
            o = np.einsum("nl,nld->nd", a, h)
            f, pre = self._features(o)
            logits = f @ Vm.T @ self.U.T
            labels = self.perm[tok[np.arange(len(tok)), pos]]
            correct += int((logits.argmax(axis=1) == labels).sum())
            mass += float(a[np.arange(len(tok)), pos].sum())
            if need_grads:
                residual = _softmax(logits)
                residual[np.arange(len(tok)), labels] -= 1.0
                grad_V += self.U.T @ residual.T @ f
                g_f = residual @ self.U @ Vm
                if self.W1 is None:
                    g_o = g_f
                else:
                    if self.features == "relu_centred":
                        g_f = g_f - g_f.mean(axis=1, keepdims=True)
                    g_o = (g_f * (pre > 0)) @ self.W1
                g_s = a * (np.einsum("nld,nd->nl", h, g_o) - (o * g_o).sum(axis=1, keepdims=True))
                grad_q += np.einsum("nl,nld->d", g_s, h)
        return {
            "accuracy": correct / n,
            "attention_mass": mass / n,
            "grad_V": grad_V / n,
            "grad_W": np.outer(grad_q / n, self.z_eos),
        }

    def three_step(self, eta: float, gamma: float) -> dict:
        d = self.E.shape[1]
        V0, W0 = np.zeros((d, self.width)), np.zeros((d, d))
        V1 = -eta * self.pass_over(V0, W0, self.train, True)["grad_V"]
        W1 = -gamma * self.pass_over(V1, W0, self.train, True)["grad_W"]
        V2 = V1 - gamma * self.pass_over(V1, W1, self.train, True)["grad_V"]
        fresh = self.pass_over(V2, W1, self.eval, False)
        train = self.pass_over(V2, W1, self.train, False)
        return {
            "accuracy": fresh["accuracy"],
            "train_accuracy": train["accuracy"],
            "attention_mass": fresh["attention_mass"],
            "V1": V1,
            "W1": W1,
            "V2": V2,
        }
