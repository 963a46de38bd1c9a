"""Wide&Deep (Cheng et al., 2016) as MindSpore's models repo trains it on Criteo click logs.

The classes keep the names of ``official/recommend/Wide_and_Deep/src/wide_and_deep.py``:

* ``WideDeepModel(config)``: ``(feat_ids, feat_vals) -> (logit, deep embedding table)``.
  Every row has ``field_size`` (id, value) pairs. The *wide* part is a linear model: one
  weight per id (an ``EmbeddingLookup`` of width 1) times the value, summed, plus ``Wide_b``.
  The *deep* part looks up an ``emb_dim`` vector per id, scales it by the value,
  concatenates the fields and runs an MLP of ``DenseLayer`` s
  ``[field_size * emb_dim] -> deep_layer_dim... -> 1``. The logit is wide + deep.
* ``NetWithLossClass``: ``(wide_loss, deep_loss)``, both the mean sigmoid cross-entropy;
  ``deep_loss`` adds ``l2_coef * ||deep table||^2 / 2`` unless the tables are sparse (then,
  as in MindSpore, the L2 term is dropped and ``deep_loss`` *is* ``wide_loss``).
* ``TrainStepWrap``: FTRL on the parameters whose name contains ``'wide'`` and (lazy) Adam on
  the rest, a fixed loss scale ``sens`` = 1024, and in data-parallel mode a
  ``DistributedGradReducer`` per optimizer.
* ``PredictWithSigmoid``: ``(logit, probability, label)`` for the AUC metric.

Host-device mode (``config.host_device_mix``, MindSpore's tutorial "Host&Device
Heterogeneous"): both tables and their ``EmbeddingLookup`` s run on the host
(``target="CPU"``), so only the looked-up rows reach the device that runs the MLP and the
loss, and only their gradient rows come back; both optimizers run on the host
(``optimizer.target = "CPU"``), which keeps all their state (FTRL's ``moments``/``linear``,
Adam's ``moment1``/``moment2``) in host memory.
"""
import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.common.initializer import initializer

__all__ = ["DenseLayer", "WideDeepModel", "NetWithLossClass", "IthOutputCell", "SensLoss",
           "TrainStepWrap", "PredictWithSigmoid"]

_ACTIVATIONS = {"relu": ops.ReLU, "sigmoid": ops.Sigmoid, "tanh": ops.Tanh}
_SLICE_MODES = {"batch": nn.EmbeddingLookup.BATCH_SLICE, "row": nn.EmbeddingLookup.TABLE_ROW_SLICE}


def init_method(method, shape, name=None):
    """A Parameter initialised as MindSpore's Wide&Deep does ("normal" is N(0, 0.01))."""
    names = {"normal": "normal", "uniform": "uniform", "one": "ones", "zero": "zeros"}
    if method not in names:
        raise ValueError(f"Wide&Deep: unknown initialisation {method!r}; expected one of {sorted(names)}")
    return ms.Parameter(initializer(names[method], shape, ms.float32), name=name)


class DenseLayer(nn.Cell):
    """``act(dropout(x) @ weight + bias)``: one layer of the deep part.

    MindSpore's layer also casts to float16 around the MatMul (``convert_dtype``); this one
    computes in float32. Dropout (``drop_out=True``, keeping ``keep_prob``) acts in training
    mode only.
    """

    def __init__(self, input_dim, output_dim, weight_bias_init=("normal", "normal"), act_str="relu",
                 keep_prob=0.5, use_activation=True, drop_out=False):
        super().__init__()
        weight_init, bias_init = weight_bias_init
        self.weight = init_method(weight_init, [input_dim, output_dim])
        self.bias = init_method(bias_init, [output_dim])
        if act_str.lower() not in _ACTIVATIONS:
            raise ValueError(f"DenseLayer: act_str must be one of {sorted(_ACTIVATIONS)}, got {act_str!r}")
        self.act_func = _ACTIVATIONS[act_str.lower()]()
        self.matmul = ops.MatMul()
        self.bias_add = ops.BiasAdd()
        self.dropout = nn.Dropout(keep_prob=keep_prob)
        self.use_activation = use_activation
        self.drop_out = drop_out

    def construct(self, x):
        if self.training and self.drop_out:
            x = self.dropout(x)
        wx = self.bias_add(self.matmul(x, self.weight), self.bias)
        if self.use_activation:
            wx = self.act_func(wx)
        return wx


class WideDeepModel(nn.Cell):
    """The network: ``construct(id_hldr, wt_hldr) -> (logit (B, 1), deep embedding table)``.

    ``config`` needs ``vocab_size``, ``field_size``, ``emb_dim``, ``deep_layer_dim`` (a list),
    ``deep_layer_act``, ``keep_prob``, ``dropout_flag``, ``host_device_mix``, ``sparse`` and
    optionally ``weight_bias_init`` (default ``("normal", "normal")``) and
    ``table_slice_mode`` ("batch" or "row", passed to both ``EmbeddingLookup`` s as
    ``slice_mode``).

    With ``host_device_mix`` the tables live on the host (``target="CPU"``); otherwise on the
    context's device (``target="DEVICE"``), sparse or dense as ``config.sparse`` says.
    """

    def __init__(self, config):
        super().__init__()
        host_device_mix = bool(config.host_device_mix)
        sparse = bool(config.sparse) or host_device_mix      # MindSpore forces sparse here
        slice_mode = getattr(config, "table_slice_mode", "batch")
        if slice_mode not in _SLICE_MODES:
            raise ValueError(f"WideDeepModel: table_slice_mode must be one of {sorted(_SLICE_MODES)}, "
                             f"got {slice_mode!r}")
        self.field_size = config.field_size
        self.emb_dim = config.emb_dim
        weight_bias_init = tuple(getattr(config, "weight_bias_init", ("normal", "normal")))
        self.all_dim_list = [self.field_size * self.emb_dim] + list(config.deep_layer_dim) + [1]
        # As in MindSpore, named "Wide_b": the capital W keeps it out of the parameters whose
        # name contains 'wide', so the deep optimizer (Adam) trains it.
        self.wide_b = init_method("normal", [1], name="Wide_b")
        self.layer_names = []
        for k in range(len(self.all_dim_list) - 1):
            last = k == len(self.all_dim_list) - 2
            layer = DenseLayer(self.all_dim_list[k], self.all_dim_list[k + 1], weight_bias_init,
                               config.deep_layer_act, keep_prob=config.keep_prob,
                               use_activation=not last, drop_out=config.dropout_flag)
            setattr(self, f"dense_layer_{k + 1}", layer)
            self.layer_names.append(f"dense_layer_{k + 1}")
        self.wide_mul = ops.Mul()
        self.deep_mul = ops.Mul()
        self.wide_add = ops.Add()
        self.deep_add = ops.Add()
        self.reduce_sum = ops.ReduceSum(keep_dims=False)
        self.reshape = ops.Reshape()
        self.deep_reshape = ops.Reshape()
        target = "CPU" if host_device_mix else "DEVICE"
        self.host_tables = target == "CPU"
        self.wide_embeddinglookup = nn.EmbeddingLookup(config.vocab_size, 1, target=target,
                                                       slice_mode=_SLICE_MODES[slice_mode],
                                                       sparse=sparse)
        self.deep_embeddinglookup = nn.EmbeddingLookup(config.vocab_size, self.emb_dim, target=target,
                                                       slice_mode=_SLICE_MODES[slice_mode],
                                                       sparse=sparse)

    @property
    def embedding_table(self):
        """The deep table (a property, so that its name stays
        ``deep_embeddinglookup.embedding_table``)."""
        return self.deep_embeddinglookup.embedding_table

    def construct(self, id_hldr, wt_hldr):
        if self.host_tables:
            # Batches arrive on the context's device; both host lookups read the ids, so
            # bring them to the host once (the rest of the network stays on the device).
            id_hldr = id_hldr.to("CPU")
        wide_id_weight = self.wide_embeddinglookup(id_hldr)          # (B, F, 1)
        deep_id_embs = self.deep_embeddinglookup(id_hldr)            # (B, F, E)
        mask = self.reshape(wt_hldr, (-1, self.field_size, 1))
        # wide: sum_f w[id_f] * val_f + b
        wx = self.wide_mul(wide_id_weight, mask)
        wide_out = self.reshape(self.wide_add(self.reduce_sum(wx, 1), self.wide_b), (-1, 1))
        # deep: MLP(concat_f E[id_f] * val_f)
        vx = self.deep_mul(deep_id_embs, mask)
        deep_in = self.deep_reshape(vx, (-1, self.field_size * self.emb_dim))
        for name in self.layer_names:
            deep_in = getattr(self, name)(deep_in)
        out = self.deep_add(wide_out, deep_in)
        return out, self.embedding_table


class NetWithLossClass(nn.Cell):
    """``(wide_loss, deep_loss)`` of ``network`` on a batch ``(ids, values, labels)``.

    ``wide_loss`` is the mean sigmoid cross-entropy (``ops.SigmoidCrossEntropyWithLogits``).
    ``deep_loss`` adds ``l2_coef * sum(deep_table**2) / 2``, except with sparse (or host)
    tables, where MindSpore drops the L2 term: then ``deep_loss`` is ``wide_loss``.
    """

    _name_scope = False    # MindSpore's auto_prefix=False: parameter names stay the model's

    def __init__(self, network, config):
        super().__init__()
        self.no_l2loss = bool(config.sparse) or bool(config.host_device_mix)
        self.network = network
        self.l2_coef = config.l2_coef
        self.loss = ops.SigmoidCrossEntropyWithLogits()
        self.square = ops.Square()
        self.reduceMean_false = ops.ReduceMean(keep_dims=False)
        self.reduceSum_false = ops.ReduceSum(keep_dims=False)

    def construct(self, batch_ids, batch_wts, label):
        predict, embedding_table = self.network(batch_ids, batch_wts)
        log_loss = self.loss(predict, label)
        wide_loss = self.reduceMean_false(log_loss)
        if self.no_l2loss:
            deep_loss = wide_loss
        else:
            l2_loss_v = self.reduceSum_false(self.square(embedding_table)) / 2
            deep_loss = self.reduceMean_false(log_loss) + self.l2_coef * l2_loss_v
        return wide_loss, deep_loss


class IthOutputCell(nn.Cell):
    """Output ``output_index`` of ``network``: the loss one gradient computation differentiates."""

    _name_scope = False

    def __init__(self, network, output_index):
        super().__init__()
        self.network = network
        self.output_index = output_index

    def construct(self, x1, x2, x3):
        return self.network(x1, x2, x3)[self.output_index]


class SensLoss(nn.Cell):
    """``(sens * loss, outputs)`` of ``network``, ``loss`` being output ``output_index`` (or the
    only output). Differentiating the first output seeds backpropagation with ``sens``, as
    MindSpore's ``GradOperation(sens_param=True)`` does with a tensor filled with ``sens``."""

    _name_scope = False

    def __init__(self, network, sens, output_index=0):
        super().__init__()
        self.network = network
        self.sens = float(sens)
        self.output_index = output_index
        self.scale_loss = ops.Mul()

    def construct(self, x1, x2, x3):
        outputs = self.network(x1, x2, x3)
        loss = outputs[self.output_index] if isinstance(outputs, tuple) else outputs
        return self.scale_loss(loss, self.sens), outputs


class TrainStepWrap(nn.Cell):
    """One training step of ``network`` (a ``NetWithLossClass``); returns ``(wide_loss, deep_loss)``.

    * ``optimizer_w``: ``nn.FTRL`` (learning rate ``wide_lr``, 5e-2 in MindSpore, l1 = l2 =
      1e-8, initial_accum 1.0) on the parameters whose name contains ``'wide'``: the wide table.
    * ``optimizer_d``: Adam (learning rate ``deep_lr``, 3.5e-4 in MindSpore, eps 1e-8) on the
      rest; lazy (``use_lazy=True``, MindSpore's former ``LazyAdam``) when the tables are sparse,
      so a sparse table gradient updates only the looked-up rows and their moments.
    * ``sens``: a fixed loss scale. The gradients are those of ``sens`` times the loss
      (``SensLoss``) and both optimizers divide by it again (``loss_scale=sens``).
    * Two gradient computations: ``wide_loss`` for ``optimizer_w``'s parameters and
      ``deep_loss`` for ``optimizer_d``'s. When ``deep_loss`` *is* ``wide_loss`` (sparse tables,
      no L2 term) both come from one backward pass over one forward pass (the same numbers:
      the gradient of one loss, split by parameter).
    * ``host_device_mix``: both optimizers run on the host (``target = "CPU"``).
    * Data parallel (``ms.set_auto_parallel_context(parallel_mode=DATA_PARALLEL)``) with more
      than one rank: one ``nn.DistributedGradReducer`` per optimizer averages the gradients
      (``gradients_mean``); sparse table gradients travel as rows.
    """

    _name_scope = False

    def __init__(self, network, sens=1024.0, host_device_mix=False, sparse=False, wide_lr=5e-2,
                 deep_lr=3.5e-4):
        super().__init__()
        self.network = network
        self.network.set_train()
        params = network.trainable_params()
        weights_w = [p for p in params if "wide" in p.name]
        weights_d = [p for p in params if "wide" not in p.name]
        self.weights_w = ms.ParameterTuple(weights_w)
        self.weights_d = ms.ParameterTuple(weights_d)
        sparse = bool(sparse) or bool(host_device_mix)
        self.optimizer_d = nn.Adam(self.weights_d, learning_rate=deep_lr, eps=1e-8, loss_scale=sens,
                                   use_lazy=sparse)
        self.optimizer_w = nn.FTRL(learning_rate=wide_lr, params=self.weights_w, l1=1e-8, l2=1e-8,
                                   initial_accum=1.0, loss_scale=sens)
        if host_device_mix:
            self.optimizer_w.target = "CPU"
            self.optimizer_d.target = "CPU"
        self.sens = float(sens)
        self.loss_net_w = IthOutputCell(network, output_index=0)
        self.loss_net_d = IthOutputCell(network, output_index=1)
        self.one_backward = bool(getattr(network, "no_l2loss", False))
        if self.one_backward:   # d(sens * wide_loss)/d(all weights), split between the optimizers
            self.grad_all = ms.value_and_grad(SensLoss(network, sens, 0), None,
                                              self.weights_w + self.weights_d, has_aux=True)
        else:
            self.grad_w = ms.value_and_grad(SensLoss(self.loss_net_w, sens), None, self.weights_w,
                                            has_aux=True)
            self.grad_d = ms.value_and_grad(SensLoss(self.loss_net_d, sens), None, self.weights_d,
                                            has_aux=True)
        self.reducer_flag = False
        parallel_mode = ms.get_auto_parallel_context("parallel_mode")
        if parallel_mode in (ms.ParallelMode.DATA_PARALLEL, ms.ParallelMode.HYBRID_PARALLEL):
            from minitorch_dist.communication import get_group_size
            self.reducer_flag = get_group_size() > 1
        if self.reducer_flag:
            mean = ms.get_auto_parallel_context("gradients_mean")
            self.grad_reducer_w = nn.DistributedGradReducer(self.optimizer_w.parameters, mean)
            self.grad_reducer_d = nn.DistributedGradReducer(self.optimizer_d.parameters, mean)

    def construct(self, batch_ids, batch_wts, label):
        if self.one_backward:
            (_, (loss_w, loss_d)), grads = self.grad_all(batch_ids, batch_wts, label)
            grads_w, grads_d = grads[:len(self.weights_w)], grads[len(self.weights_w):]
        else:
            (_, loss_w), grads_w = self.grad_w(batch_ids, batch_wts, label)
            (_, loss_d), grads_d = self.grad_d(batch_ids, batch_wts, label)
        if self.reducer_flag:
            grads_w = self.grad_reducer_w(grads_w)
            grads_d = self.grad_reducer_d(grads_d)
        self.optimizer_w(grads_w)
        self.optimizer_d(grads_d)
        return loss_w, loss_d


class PredictWithSigmoid(nn.Cell):
    """Evaluation: ``(logit, sigmoid(logit), label)``; the AUC metric reads the last two."""

    _name_scope = False

    def __init__(self, network):
        super().__init__()
        self.network = network
        self.sigmoid = ops.Sigmoid()

    def construct(self, batch_ids, batch_wts, labels):
        logits, _ = self.network(batch_ids, batch_wts)
        pred_probs = self.sigmoid(logits)
        return logits, pred_probs, labels
