"""How the distributed optimizers name parameters: names are what every rank's runtime
matches tensors by, whatever order their hooks fire in."""


def parameter_names(param_groups, named_parameters, unnamed_prefix):
    """Each parameter's name: from named_parameters ((name, parameter) tuples, unique names,
    covering every parameter of the optimizer), else '<unnamed_prefix>.<group>.<index>'."""
    all_params = [p for group in param_groups for p in group["params"]]
    if named_parameters is None:
        return {p: f"{unnamed_prefix}.{i}.{j}" for i, g in enumerate(param_groups) for j, p in enumerate(g["params"])}
    named = list(named_parameters)
    if any(not isinstance(item, tuple) for item in named):
        raise ValueError("kolo.torch: named_parameters must be (name, parameter) tuples, as "
                         "model.named_parameters() gives")
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise ValueError("kolo.torch: DistributedOptimizer: named_parameters has duplicate names")
    by_param = {p: n for n, p in named}
    missing = [p for p in all_params if p not in by_param]
    if missing:
        raise ValueError(f"kolo.torch: DistributedOptimizer: {len(missing)} parameters of the optimizer are "
                         "not in named_parameters")
    return by_param
