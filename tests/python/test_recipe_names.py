"""Every Python entry point that takes a recipe name refuses an unknown one with the list of valid names,
before doing anything else: nt.Linear, nt.convert (also on a model with no nn.Linear left to replace), and
the torch emulation's quantizer. Runs on CPU, without nibble._C."""
import pytest

torch = pytest.importorskip("torch")
nt = pytest.importorskip("nibble.torch")
from nibble.backends import emulated  # noqa: E402

VALID = "valid recipes: " + ", ".join(nt.RECIPES)


def test_linear_refuses_an_unknown_recipe():
    for bad in ("quartett", "FP8-current", "", None, 4):
        with pytest.raises(ValueError, match=f"recipe {bad!r} is unknown; {VALID}"):
            nt.Linear(64, 64, recipe=bad)


def test_convert_refuses_an_unknown_recipe_before_touching_the_model():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
    with pytest.raises(ValueError, match=f"recipe 'quartett' is unknown; {VALID}"):
        nt.convert(model, "quartett")
    assert all(type(m) is torch.nn.Linear for m in (model[0], model[2])), "a refused convert changed the model"


def test_convert_checks_the_recipe_when_nothing_is_left_to_convert():
    model = nt.convert(torch.nn.Sequential(torch.nn.Linear(64, 64)), "quartet")
    assert isinstance(model[0], nt.Linear)
    with pytest.raises(ValueError, match=f"recipe 'quartett' is unknown; {VALID}"):
        nt.convert(model, "quartett")
    with pytest.raises(ValueError, match="recipe 'fp4' is unknown"):
        nt.convert(torch.nn.Sequential(torch.nn.ReLU()), "fp4")  # no nn.Linear at all
    with pytest.raises(ValueError, match="unknown recipe options"):
        nt.convert(model, "quartet", rounding="nearest")  # a misspelled option, same rule
    assert nt.convert(model, "mxfp4") is model  # a valid name on a converted model: nothing to do, no error


def test_every_listed_recipe_is_accepted():
    for recipe in nt.RECIPES:
        nt.check_recipe(recipe)
        assert nt.convert(torch.nn.Sequential(torch.nn.Linear(128, 128)), recipe)[0].recipe == recipe


def test_emulated_quantizer_refuses_an_unknown_recipe():
    backend = emulated.EmulatedBackend(dict(mx_scale_rule="ocp"))
    with pytest.raises(ValueError, match="recipe 'quartett' has no plain quantizer; valid:"):
        backend.plain(torch.randn(4, 32), "quartett", "x", 0)


def test_sweep_refuses_an_unknown_recipe_before_any_run(tmp_path, capsys):
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "train", "sweep.py")
    spec = importlib.util.spec_from_file_location("nibble_sweep_names", path)
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as stop:
        sweep.main(["--recipes", "bf16,quartett", "--out", str(out), "--dry-run"])
    assert stop.value.code == 2
    assert "unknown recipe(s) ['quartett']; valid: bf16," in capsys.readouterr().err
    assert not out.exists(), "a refused sweep created its output folder"
