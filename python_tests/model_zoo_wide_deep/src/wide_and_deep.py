"""Wide&Deep as the models repository's ``src/wide_and_deep.py`` builds it, written here with
MindSpore's names: ``init_method``, ``init_var_dict``, ``DenseLayer`` (float16 MatMul and
BiasAdd), ``WideDeepModel``, ``NetWithLossClass``, ``IthOutputCell``, ``TrainStepWrap`` (two
``GradOperation``s, FTRL for the wide part and Adam for the deep part) and
``PredictWithSigmoid``.

Covered branches: the plain (data-parallel or standalone) model with device tables, and the
(semi-)auto-parallel sparse model whose wide table is row-sliced and deep table column-sliced
(or row-sliced), with its tables on the host under ``host_device_mix``. The field-slice and
parameter-server branches are refused with an error rather than run differently.
"""
import numpy as np

from minitorch_dist import nn, context
from minitorch_dist import Parameter, ParameterTuple
import minitorch_dist.common.dtype as mstype
import minitorch_dist.ops as ops
from minitorch_dist.nn import Dropout
from minitorch_dist.nn.optim import Adam, FTRL
from minitorch_dist.common.initializer import Uniform, initializer
from minitorch_dist.context import ParallelMode
from minitorch_dist.nn.wrap.grad_reducer import DistributedGradReducer
from minitorch_dist.communication.management import get_group_size

np_type = np.float32
ms_type = mstype.float32
_AUTO = (ParallelMode.SEMI_AUTO_PARALLEL, ParallelMode.AUTO_PARALLEL)


def _is_auto_parallel():
    return context.get_auto_parallel_context("parallel_mode") in _AUTO


def init_method(method, shape, name, max_val=1.0):
    """A float32 Parameter initialised by ``method``: 'uniform', 'one', 'zero' or 'normal'."""
    kinds = {"uniform": lambda: Uniform(max_val), "one": lambda: "ones", "zero": lambda: "zeros",
             "normal": lambda: "normal"}
    if method not in kinds:
        raise ValueError(f"init_method: unknown method {method!r}; expected one of {sorted(kinds)}")
    return Parameter(initializer(kinds[method](), shape, ms_type), name=name)


def init_var_dict(init_args, in_vars):
    """Parameters by key from ``(key, shape, method)`` items ('random' is 'uniform' here,
    bounded by ``init_args[1]``); the first item of a key wins."""
    _, max_val = init_args
    var_map = {}
    for key, shape, method in in_vars:
        if key not in var_map:
            method = "uniform" if method == "random" else method
            var_map[key] = init_method(method, shape, key, max_val)
    return var_map


class DenseLayer(nn.Cell):
    """One deep layer: optional dropout, then activation(x @ weight + bias), computed in
    float16 (inputs, weight and bias cast down, the result cast back to float32) when
    ``convert_dtype``."""

    def __init__(self, input_dim, output_dim, weight_bias_init, act_str,
                 keep_prob=0.5, use_activation=True, convert_dtype=True, drop_out=False):
        super(DenseLayer, self).__init__()
        weight_init, bias_init = weight_bias_init
        self.weight = init_method(weight_init, [input_dim, output_dim], name="weight")
        self.bias = init_method(bias_init, [output_dim], name="bias")
        self.act_func = self._init_activation(act_str)
        self.matmul = ops.MatMul(transpose_b=False)
        self.bias_add = ops.BiasAdd()
        self.cast = ops.Cast()
        self.dropout = Dropout(p=1 - keep_prob)
        self.use_activation = use_activation
        self.convert_dtype = convert_dtype
        self.drop_out = drop_out

    @staticmethod
    def _init_activation(act_str):
        acts = {"relu": ops.ReLU, "sigmoid": ops.Sigmoid, "tanh": ops.Tanh}
        if act_str.lower() not in acts:
            raise ValueError(f"DenseLayer: unknown activation {act_str!r}; expected one of {sorted(acts)}")
        return acts[act_str.lower()]()

    def construct(self, x):
        if self.training and self.drop_out:
            x = self.dropout(x)
        weight, bias = self.weight, self.bias
        if self.convert_dtype:
            x = self.cast(x, mstype.float16)
            weight = self.cast(weight, mstype.float16)
            bias = self.cast(bias, mstype.float16)
        wx = self.bias_add(self.matmul(x, weight), bias)
        if self.use_activation:
            wx = self.act_func(wx)
        if self.convert_dtype:
            wx = self.cast(wx, mstype.float32)
        return wx


class WideDeepModel(nn.Cell):
    """Wide & Deep (Cheng et al., 2016): a linear model over the feature ids (the wide table,
    one weight per id, plus ``Wide_b``) added to an MLP over their embeddings (the deep
    table). ``construct(ids, weights)`` returns the logits (batch, 1) and the deep table."""

    def __init__(self, config):
        super(WideDeepModel, self).__init__()
        self.batch_size = config.batch_size
        host_device_mix = bool(config.host_device_mix)
        is_auto_parallel = _is_auto_parallel()
        if config.field_slice or bool(config.parameter_server):
            raise NotImplementedError("WideDeepModel (test version): the field_slice and parameter_server "
                                      "branches are not part of it; use field_slice=False, parameter_server=0")
        if is_auto_parallel:
            self.batch_size = self.batch_size * get_group_size()   # the full batch the graph sees
        sparse = config.sparse
        self.field_size = config.field_size
        self.emb_dim = config.emb_dim
        self.weight_init, self.bias_init = config.weight_bias_init
        self.deep_input_dims = self.field_size * self.emb_dim
        self.all_dim_list = [self.deep_input_dims] + list(config.deep_layer_dim) + [1]
        self.wide_b = init_var_dict(config.init_args, [("Wide_b", [1], config.emb_init)])["Wide_b"]
        dims = self.all_dim_list
        for i in range(1, 6):     # dense_layer_1 ... dense_layer_5, the last without activation
            setattr(self, f"dense_layer_{i}",
                    DenseLayer(dims[i - 1], dims[i], config.weight_bias_init, config.deep_layer_act,
                               use_activation=i < 5, convert_dtype=True, drop_out=config.dropout_flag))
        self.wide_mul = ops.Mul()
        self.deep_mul = ops.Mul()
        self.reduce_sum = ops.ReduceSum(keep_dims=False)
        self.reshape = ops.Reshape()
        self.deep_reshape = ops.Reshape()
        self.square = ops.Square()
        self.concat = ops.Concat(axis=1)
        self.unique = ops.Unique().shard(((1,),))
        self.wide_gatherv2 = ops.Gather()
        self.deep_gatherv2 = ops.Gather()
        if is_auto_parallel and sparse:
            self._sliced_tables(config, 'CPU' if host_device_mix else 'DEVICE')
        else:
            self.deep_embeddinglookup = nn.EmbeddingLookup(config.vocab_size, self.emb_dim, target='DEVICE',
                                                           sparse=sparse, vocab_cache_size=config.vocab_cache_size)
            self.wide_embeddinglookup = nn.EmbeddingLookup(config.vocab_size, 1, target='DEVICE', sparse=sparse,
                                                           vocab_cache_size=config.vocab_cache_size)
        self.embedding_table = self.deep_embeddinglookup.embedding_table

    def _sliced_tables(self, config, target):
        """Upstream's auto-parallel sparse tables: wide row-sliced; deep column-sliced with the
        first MatMul split along its reduction to match (or row-sliced)."""
        devices = get_group_size()
        row, column = nn.EmbeddingLookup.TABLE_ROW_SLICE, nn.EmbeddingLookup.TABLE_COLUMN_SLICE
        self.wide_embeddinglookup = nn.EmbeddingLookup(config.vocab_size, 1, target=target, slice_mode=row)
        if config.deep_table_slice_mode == "column_slice":
            self.deep_embeddinglookup = nn.EmbeddingLookup(config.vocab_size, self.emb_dim, target=target,
                                                           slice_mode=column)
            if config.use_sp:
                self.dense_layer_1.matmul.shard(((1, devices), (devices, 1)))
                self.dense_layer_1.bias_add.shard(((devices, 1), (1,)))
            else:
                self.dense_layer_1.dropout.dropout.shard(((1, devices),))
                self.dense_layer_1.matmul.shard(((1, devices), (devices, 1)))
            self.deep_mul.shard(((1, 1, devices), (1, 1, 1)))
            self.dense_layer_1.matmul.add_prim_attr("field_size", self.field_size)
            self.deep_reshape.add_prim_attr("skip_redistribution", True)
        else:
            self.deep_embeddinglookup = nn.EmbeddingLookup(config.vocab_size, self.emb_dim, target=target,
                                                           slice_mode=row)
        self.reduce_sum.add_prim_attr("cross_batch", True)

    def construct(self, id_hldr, wt_hldr):
        """``id_hldr``: (batch, fields) int32 ids; ``wt_hldr``: (batch, fields) float32 values."""
        wide_id_weight = self.wide_embeddinglookup(id_hldr)
        deep_id_embs = self.deep_embeddinglookup(id_hldr)
        mask = self.reshape(wt_hldr, (self.batch_size, self.field_size, 1))
        wx = self.wide_mul(wide_id_weight, mask)
        wide_out = self.reshape(self.reduce_sum(wx, 1) + self.wide_b, (-1, 1))
        vx = self.deep_mul(deep_id_embs, mask)
        deep_in = self.deep_reshape(vx, (-1, self.field_size * self.emb_dim))
        for layer in (self.dense_layer_1, self.dense_layer_2, self.dense_layer_3, self.dense_layer_4):
            deep_in = layer(deep_in)
        deep_out = self.dense_layer_5(deep_in)
        return wide_out + deep_out, self.embedding_table


class NetWithLossClass(nn.Cell):
    """The two losses: ``wide_loss`` = mean sigmoid cross-entropy, ``deep_loss`` = the same
    plus ``l2_coef`` * ||deep table||^2 / 2 (dropped when sparse, and in (semi-)auto parallel
    with host_device_mix, as upstream)."""

    def __init__(self, network, config):
        super(NetWithLossClass, self).__init__(auto_prefix=False)
        host_device_mix = bool(config.host_device_mix)
        parameter_server = bool(config.parameter_server)
        is_auto_parallel = _is_auto_parallel()
        self.no_l2loss = (is_auto_parallel if (host_device_mix or config.field_slice) else parameter_server)
        if config.sparse:
            self.no_l2loss = True
        self.network = network
        self.l2_coef = config.l2_coef
        self.loss = ops.SigmoidCrossEntropyWithLogits()
        self.square = ops.Square()
        self.reduceMean_false = ops.ReduceMean(keep_dims=False)
        if is_auto_parallel:
            self.reduceMean_false.add_prim_attr("cross_batch", True)
        self.reduceSum_false = ops.ReduceSum(keep_dims=False)

    def construct(self, batch_ids, batch_wts, label):
        predict, embedding_table = self.network(batch_ids, batch_wts)
        log_loss = self.loss(predict, label)
        wide_loss = self.reduceMean_false(log_loss)
        if self.no_l2loss:
            return wide_loss, wide_loss
        l2_loss_v = self.reduceSum_false(self.square(embedding_table)) / 2
        return wide_loss, self.reduceMean_false(log_loss) + self.l2_coef * l2_loss_v


class IthOutputCell(nn.Cell):
    """Output ``output_index`` of ``network``: the loss one GradOperation differentiates."""

    def __init__(self, network, output_index):
        super(IthOutputCell, self).__init__()
        self.network = network
        self.output_index = output_index

    def construct(self, x1, x2, x3):
        return self.network(x1, x2, x3)[self.output_index]


class TrainStepWrap(nn.Cell):
    """One training step: the gradient of ``wide_loss`` for the parameters with 'wide' in their
    name (FTRL) and of ``deep_loss`` for the others (Adam), both scaled by ``sens`` (the
    optimizers divide it out through ``loss_scale``), all-reduced in data parallel.

    Sparse under (semi-)auto parallel, Adam is lazy, and with ``host_device_mix`` both
    optimizers run on the host (``optimizer.target = "CPU"``)."""

    def __init__(self, network, sens=1024.0, host_device_mix=False, parameter_server=False,
                 sparse=False, cache_enable=False):
        super(TrainStepWrap, self).__init__()
        parallel_mode = context.get_auto_parallel_context("parallel_mode")
        is_auto_parallel = parallel_mode in _AUTO
        self.network = network
        self.network.set_train()
        self.trainable_params = network.trainable_params()
        self.weights_w = ParameterTuple([p for p in self.trainable_params if 'wide' in p.name])
        self.weights_d = ParameterTuple([p for p in self.trainable_params if 'wide' not in p.name])
        lazy = (sparse and is_auto_parallel) or (sparse and parameter_server)
        adam_options = {"use_lazy": True} if lazy else {}
        self.optimizer_d = Adam(self.weights_d, learning_rate=3.5e-4, eps=1e-8, loss_scale=sens, **adam_options)
        self.optimizer_w = FTRL(learning_rate=5e-2, params=self.weights_w,
                                l1=1e-8, l2=1e-8, initial_accum=1.0, loss_scale=sens)
        if lazy and (host_device_mix or (parameter_server and not cache_enable)):
            self.optimizer_w.target = "CPU"
            self.optimizer_d.target = "CPU"
        self.hyper_map = ops.HyperMap()
        self.grad_w = ops.GradOperation(get_by_list=True, sens_param=True)
        self.grad_d = ops.GradOperation(get_by_list=True, sens_param=True)
        self.sens = sens
        self.loss_net_w = IthOutputCell(network, output_index=0)
        self.loss_net_d = IthOutputCell(network, output_index=1)
        self.loss_net_w.set_grad()
        self.loss_net_d.set_grad()
        self.reducer_flag = parallel_mode in (ParallelMode.DATA_PARALLEL, ParallelMode.HYBRID_PARALLEL)
        self.grad_reducer_w = None
        self.grad_reducer_d = None
        if self.reducer_flag:
            mean = context.get_auto_parallel_context("gradients_mean")
            degree = context.get_auto_parallel_context("device_num")
            self.grad_reducer_w = DistributedGradReducer(self.optimizer_w.parameters, mean, degree)
            self.grad_reducer_d = DistributedGradReducer(self.optimizer_d.parameters, mean, degree)

    def construct(self, batch_ids, batch_wts, label):
        weights_w = self.weights_w
        weights_d = self.weights_d
        loss_w, loss_d = self.network(batch_ids, batch_wts, label)
        sens_w = ops.Fill()(ops.DType()(loss_w), ops.Shape()(loss_w), self.sens)
        sens_d = ops.Fill()(ops.DType()(loss_d), ops.Shape()(loss_d), self.sens)
        grads_w = self.grad_w(self.loss_net_w, weights_w)(batch_ids, batch_wts, label, sens_w)
        grads_d = self.grad_d(self.loss_net_d, weights_d)(batch_ids, batch_wts, label, sens_d)
        if self.reducer_flag:
            grads_w = self.grad_reducer_w(grads_w)
            grads_d = self.grad_reducer_d(grads_d)
        return ops.depend(loss_w, self.optimizer_w(grads_w)), ops.depend(loss_d, self.optimizer_d(grads_d))


class PredictWithSigmoid(nn.Cell):
    """Evaluation: ``(logits, sigmoid(logits), labels)``, what ``AUCMetric.update`` takes."""

    def __init__(self, network):
        super(PredictWithSigmoid, self).__init__()
        self.network = network
        self.sigmoid = ops.Sigmoid()
        full_batch = context.get_auto_parallel_context("full_batch")
        if _is_auto_parallel() and full_batch:
            self.sigmoid.shard(((1, 1),))

    def construct(self, batch_ids, batch_wts, labels):
        logits, _ = self.network(batch_ids, batch_wts)
        return logits, self.sigmoid(logits), labels
