"""Rollout, flow and effective attention (engine/across_layers.py) on planted maps with hand answers, and their
identities: rollout == flow in layer 1, flow == the authors' networkx max-flow, A_eff T == A T with no component of
A_eff in T's left null space."""
import networkx as nx
import numpy as np
import pytest
import torch
from scipy.linalg import null_space

from bertattn_bench.engine import across_layers as al

TO_FIRST = [[1.0, 0.0], [1.0, 0.0]]  # both tokens attend to token 0
TO_SECOND = [[0.0, 1.0], [0.0, 1.0]]


def maps(*layers) -> torch.Tensor:
    return torch.tensor(layers, dtype=torch.float64)


def random_maps(rng, layers: int, n: int) -> torch.Tensor:
    return torch.from_numpy(rng.dirichlet(np.ones(n) * 0.5, size=(layers, n)))


def test_residual_mixing_is_half_map_half_identity():
    a = al.residual_mixed(maps(TO_SECOND))[0]
    assert torch.allclose(a, torch.tensor([[0.5, 0.5], [0.0, 1.0]], dtype=torch.float64))


def test_rollout_of_a_chain_by_hand():
    # every layer: both tokens attend to token 0 -> A = [[1, 0], [.5, .5]]; token 1 keeps (1/2)^l of itself
    j = al.rollout(maps(TO_FIRST, TO_FIRST, TO_FIRST))
    assert torch.allclose(j[1, 1], torch.tensor([0.75, 0.25], dtype=torch.float64))
    assert torch.allclose(j[2, 1], torch.tensor([0.875, 0.125], dtype=torch.float64))
    assert torch.allclose(j[2, 0], torch.tensor([1.0, 0.0], dtype=torch.float64))


def test_rollout_of_two_layers_by_hand():
    # A1 = [[1, 0], [.5, .5]], A2 = [[.5, .5], [0, 1]]: J2 = A2 A1 = [[.75, .25], [.5, .5]]
    j = al.rollout(maps(TO_FIRST, TO_SECOND))
    assert torch.allclose(j[1], torch.tensor([[0.75, 0.25], [0.5, 0.5]], dtype=torch.float64))


def test_flow_of_two_layers_by_hand():
    # from token 0 after layer 2: to input 0 through (1,0) min(.5, 1) and through (1,1) min(.5, .5): 1.0;
    # to input 1 only through (1,1): .5. Normalised: [2/3, 1/3] (rollout says [.75, .25])
    mixed = al.residual_mixed(maps(TO_FIRST, TO_SECOND)).numpy()
    f = al.flow(mixed, queries=(0, 1))
    assert np.allclose(f[1, 0], [2 / 3, 1 / 3], atol=1e-6)
    assert np.allclose(f[1, 1], [0.5, 0.5], atol=1e-6)  # (2,1) -> (1,1) only, cap 1; then .5 / .5


def test_flow_of_a_chain_by_hand():
    # three layers of TO_FIRST, from token 1: to input 1 only along the .5 self-edges (.5); to input 0 everything
    # the source can send (1.0): [2/3, 1/3]
    f = al.flow(al.residual_mixed(maps(TO_FIRST, TO_FIRST, TO_FIRST)).numpy(), queries=(1,))
    assert np.allclose(f[2, 0], [2 / 3, 1 / 3], atol=1e-6)


def test_rollout_equals_flow_in_the_first_layer():
    rng = np.random.default_rng(1)
    w = random_maps(rng, 3, 7)
    mixed = al.residual_mixed(w)
    f = al.flow(mixed.numpy(), queries=range(7), layers=[0])
    assert np.allclose(f[0], al.rollout(w)[0].numpy(), atol=5e-6)
    assert np.allclose(al.rollout(w)[0].numpy(), 0.5 * w[0].numpy() + 0.5 * np.eye(7))


def test_flow_matches_the_authors_networkx_max_flow():
    """The authors' compute_node_flow: networkx maximum_flow_value on get_adjmat's graph, the row normalised."""
    rng = np.random.default_rng(2)
    n, layers = 5, 3
    mixed = al.residual_mixed(random_maps(rng, layers, n)).numpy()
    size = (layers + 1) * n
    adj = np.zeros((size, size))
    for i in range(1, layers + 1):  # get_adjmat, attention_graph_util.py l.15-22
        adj[i * n:(i + 1) * n, (i - 1) * n:i * n] = mixed[i - 1]
    graph = nx.from_numpy_array(adj, create_using=nx.DiGraph(), edge_attr="capacity")
    for layer in range(layers):
        src = (layer + 1) * n
        ref = np.array([nx.maximum_flow_value(graph, src, v) for v in range(n)])
        ref /= ref.sum()
        assert np.allclose(al.flow(mixed, queries=(0,), layers=[layer])[0, 0], ref, atol=1e-5), layer


def test_rollout_ignores_padding():
    rng = np.random.default_rng(3)
    w = random_maps(rng, 4, 5)
    padded = torch.zeros(2, 4, 8, 8, dtype=torch.float64)
    padded[0, :, :5, :5] = w
    padded[0, :, 5:, :] = 0.3  # padded query rows hold garbage; padded keys are zero as the attention gives them
    padded[0, :, :5, 5:] = 0.0
    padded[1] = torch.from_numpy(rng.dirichlet(np.ones(8), size=(4, 8)))
    mask = torch.tensor([[True] * 5 + [False] * 3, [True] * 8])
    j = al.rollout(padded, mask)
    assert torch.allclose(j[0, :, :5, :5], al.rollout(w))
    assert j[0, :, 5:].abs().sum() == 0 and j[0, :, :, 5:].abs().sum() == 0
    assert torch.allclose(j[1], al.rollout(padded[1]))


def planted_head(rng, n: int, d: int, hidden: int):
    """One head: A (n, n) a softmax map, values (n, d) with bias, W_O^h (hidden, d)."""
    a = torch.softmax(torch.from_numpy(rng.normal(size=(n, n)) * 2), -1)
    v = torch.from_numpy(rng.normal(size=(1, n, d)))
    w = torch.from_numpy(rng.normal(size=(hidden, d)))
    return a, v, w


@pytest.mark.parametrize("n,d", [(12, 4), (20, 8), (24, 4)])  # T wide (n < hidden 16) and tall
def test_effective_attention_keeps_the_output_and_drops_the_null_space(n, d):
    rng = np.random.default_rng(n)
    a, v, w = planted_head(rng, n, d, hidden=16)
    t = al.value_transforms(v, w, 1)  # (1, 1, n, hidden)
    assert torch.allclose(t[0, 0], v[0] @ w.T)
    eff = al.effective_attention(a[None, None], t)[0, 0]
    assert torch.allclose(eff @ t[0, 0].double(), a @ t[0, 0].double(), atol=1e-9)
    null = torch.from_numpy(null_space(t[0, 0].double().numpy().T))  # u with u^T T = 0
    assert null.shape[1] == n - d
    assert (eff @ null).abs().max() < 1e-9
    assert (a @ null).abs().max() > 1e-2  # the raw map had a part the head cannot see
    assert (eff - a).abs().max() > 1e-3


def test_effective_attention_of_a_float32_head_has_the_head_rank():
    """T computed in float32 (as a model computes it): the rank tolerance is float32's, so its rank is d_head,
    not n (float32 noise past the d-th singular value is not a direction of T)."""
    rng = np.random.default_rng(8)
    a, v, w = planted_head(rng, 15, 4, hidden=16)
    t = al.value_transforms(v.float(), w.float(), 1)
    assert t.dtype == torch.float32
    _, rank = al.column_projector(t)
    assert int(rank) == 4
    eff = al.effective_attention(a.float()[None, None], t)[0, 0]
    assert torch.allclose(eff @ t[0, 0].double(), a @ t[0, 0].double(), atol=1e-4)
    assert (eff - a).abs().max() > 1e-2


def test_effective_attention_is_the_raw_map_when_the_sequence_is_short():
    rng = np.random.default_rng(5)
    a, v, w = planted_head(rng, 6, 8, hidden=16)  # n <= d_head: T has full row rank
    eff = al.effective_attention(a[None, None], al.value_transforms(v, w, 1))[0, 0]
    assert torch.allclose(eff, a, atol=1e-9)


def test_value_transforms_sum_to_the_attention_output():
    """sum_h A^h T^h == (A V) W_O^T: the heads' transforms are the model's own output projection, head by head."""
    rng = np.random.default_rng(6)
    n, h, d, hidden = 7, 3, 4, 12
    values = torch.from_numpy(rng.normal(size=(1, n, h * d)))
    w_out = torch.from_numpy(rng.normal(size=(hidden, h * d)))
    probs = torch.softmax(torch.from_numpy(rng.normal(size=(1, h, n, n))), -1)
    t = al.value_transforms(values, w_out, h).double()
    ctx = (probs @ values.view(1, n, h, d).transpose(1, 2)).transpose(1, 2).reshape(1, n, h * d)
    assert torch.allclose((probs @ t).sum(1), ctx @ w_out.T, atol=1e-4)


def test_effective_attention_ignores_padding():
    rng = np.random.default_rng(7)
    a, v, w = planted_head(rng, 10, 3, hidden=8)
    t = al.value_transforms(v, w, 1)
    alone = al.effective_attention(a[None, None], t)[0, 0]
    pa = torch.zeros(1, 1, 13, 13, dtype=torch.float64)
    pa[0, 0, :10, :10] = a
    pt = torch.zeros(1, 1, 13, 8, dtype=t.dtype)
    pt[0, 0, :10] = t[0, 0]
    pt[0, 0, 10:] = 5.0  # garbage in the padded rows of T
    mask = torch.tensor([[True] * 10 + [False] * 3])
    eff = al.effective_attention(pa, pt, mask)[0, 0]
    assert torch.allclose(eff[:10, :10], alone, atol=1e-9)
    assert eff[10:].abs().max() == 0 and eff[:, 10:].abs().max() < 1e-12
