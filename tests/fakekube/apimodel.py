"""An object checked against the Kubernetes API's own models (the
python3-kubernetes classes, generated from the API's OpenAPI): every field
exists, at its level, recursively through lists and maps. Used for the
chart's rendered objects (tests/chart) and codepod's built-in pod template
(tests/kube/test_kube_admission.py)."""


def check_against_model(obj, model, path):
    """Every field of obj exists in the Kubernetes model (no typos, no field at
    the wrong level), recursively; types of lists and maps followed."""
    import kubernetes.client.models as m
    if model in ("object", "str", "int", "bool", "float", "datetime"):
        return
    if model.startswith("list["):
        assert isinstance(obj, list), f"{path}: not a list"
        for i, x in enumerate(obj):
            check_against_model(x, model[5:-1], f"{path}[{i}]")
        return
    if model.startswith("dict("):
        inner = model[5:-1].split(", ", 1)[1]
        assert isinstance(obj, dict), f"{path}: not a map"
        for k, x in obj.items():
            check_against_model(x, inner, f"{path}.{k}")
        return
    cls = getattr(m, model)
    assert isinstance(obj, dict), f"{path}: not an object ({model})"
    by_json = {v: k for k, v in cls.attribute_map.items()}
    for k, v in obj.items():
        assert k in by_json, f"{path}: {model} has no field {k!r}"
        check_against_model(v, cls.openapi_types[by_json[k]], f"{path}.{k}")
