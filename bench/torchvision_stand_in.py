"""An import-time stand-in for torchvision, so that timm (bench/bench_vit.py's peer) imports
without it: no torchvision wheel is built for the pinned torch. timm's model code imports a few
torchvision names at module level (FrozenBatchNorm2d, the data transforms) but the ViT and Swin
forward passes never call them; any use of a stand-in name raises."""
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types


def _member(owner, name, base):
    """A new stand-in class `name` deriving from `base`, kept on `owner` (distinct names give
    distinct classes, as module-level tables keyed by them need)."""
    if name.startswith("__"):
        raise AttributeError(name)
    member = _Named(name, (base,), {})
    setattr(owner, name, member)
    return member


class _Named(type):
    def __getattr__(cls, name):
        return _member(cls, name, cls)


class _Missing(metaclass=_Named):
    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"{type(self).__name__}: torchvision is not installed")


class _Module(types.ModuleType):
    __path__ = []

    def __getattr__(self, name):
        return _member(self, name, _Missing)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Module(spec.name)

    def exec_module(self, module):
        module.__version__ = "0.0"


def install():
    """Serves every torchvision import from the stand-in unless a real torchvision exists."""
    if importlib.util.find_spec("torchvision") is None:
        sys.meta_path.insert(0, _Finder())
