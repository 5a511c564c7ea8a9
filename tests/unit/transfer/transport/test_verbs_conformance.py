"""The pyverbs API this data plane uses, checked against the real thing.

* Every enum ``verbs.ENUMS`` names exists, qualified by its enum class, in
  the installed pyverbs (Debian 12: rdma-core v44, ``pyverbs.enums``) and
  in rdma-core v59's ``pyverbs.libibverbs_enums`` (the fixture).
* Every module, class, function, method and attribute of the fake pyverbs
  (``fakeverbs``) exists in the installed pyverbs, and its keyword
  arguments are accepted by the real classes (built without a device) or
  documented by them (the ones that need a device).  The data plane runs
  on the fake in the other tests, so it cannot use anything this test
  does not check.

Loading pyverbs in its v44 and v59 layouts: test_pyverbs_layouts.
"""

import inspect
import re
import sys


from dtn_migrate.transfer.transport import verbs
from tests.unit.transfer.transport import fakeverbs
from tests.unit import testcase


# Classes the real pyverbs lets us build without a device: their keyword
# arguments are checked by building them.
BUILDABLE = {
    "QPCap": {}, "QPInitAttr": {}, "QPAttr": {}, "GlobalRoute": {},
    "AHAttr": {}, "GID": {}, "WC": {},
    "SGE": {"addr": 0x1000, "length": 1, "lkey": 1},
    "SendWR": {},
}


def real(name):
    try:
        __import__("pyverbs." + name)
    except Exception as exc:       # pragma: no cover - no pyverbs here
        raise testcase.TestCase.skipException(
            "pyverbs is not importable: %s" % exc)
    return sys.modules["pyverbs." + name]


def public(names):
    return {n for n in names if not n.startswith("_")}


def keywords(func):
    return [p.name for p in inspect.signature(func).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL,
                                                   p.VAR_KEYWORD)]


class EnumConformanceTest(testcase.TestCase):

    def test_used_enums_exist_in_v59(self):
        fixture = fakeverbs.v59_enums()
        for cls, members in verbs.ENUMS.items():
            self.assertIn(cls, fixture)
            for member in members:
                self.assertIn(member, fixture[cls], "%s.%s not in v59"
                              % (cls, member))
        for cls in verbs.ENUM_CLASSES:
            self.assertIn(cls, fixture)

    def test_used_enums_exist_in_installed_pyverbs(self):
        enums = real("enums")
        e = verbs.enum_namespace(enums)
        for cls, members in verbs.ENUMS.items():
            for member in members:
                self.assertEqual(getattr(getattr(enums, cls), member),
                                 getattr(e, member))
        # The names the code and the fake look up by status.
        for member in fakeverbs.v59_enums()["ibv_wc_status"]:
            self.assertTrue(hasattr(enums.ibv_wc_status, member), member)

    def test_qualified_only_module_loads(self):
        # v59 under Cython 3.1: no module-level names at all.
        mod = fakeverbs.v59_enum_module()
        self.assertFalse(hasattr(mod, "IBV_ACCESS_REMOTE_READ"))
        e = verbs.enum_namespace(mod)
        self.assertEqual(4, int(e.IBV_ACCESS_REMOTE_READ))
        self.assertEqual("IBV_WC_REM_ACCESS_ERR",
                         e.ibv_wc_status(e.IBV_WC_SUCCESS + 10).name)

    def test_missing_member_is_incompatible(self):
        mod = fakeverbs.v59_enum_module()
        del mod.ibv_qp_state
        exc = self.assertRaises(verbs.PyverbsIncompatible,
                                verbs.enum_namespace, mod)
        self.assertIn("pyverbs incompatible:", str(exc))
        self.assertIn("ibv_qp_state", str(exc))


class ApiConformanceTest(testcase.TestCase):
    """The fake's surface is a subset of the installed pyverbs'."""

    def test_modules_classes_and_functions(self):
        for mod_name, members in fakeverbs.MODULES.items():
            mod = real(mod_name)
            for member in members:
                self.assertTrue(hasattr(mod, member.__name__),
                                "pyverbs.%s has no %s"
                                % (mod_name, member.__name__))

    def _real_class(self, mod_name, cls):
        return getattr(real(mod_name), cls.__name__)

    def test_methods_and_attributes(self):
        for mod_name, members in fakeverbs.MODULES.items():
            for cls in members:
                if not inspect.isclass(cls) or \
                        issubclass(cls, BaseException):
                    continue
                real_cls = self._real_class(mod_name, cls)
                sim = fakeverbs.SIMULATION_ONLY.get(cls.__name__, set())
                names = public(vars(cls)) | public(
                    getattr(cls, "__slots__", ()))
                for name in sorted(names - sim):
                    self.assertTrue(hasattr(real_cls, name),
                                    "pyverbs.%s.%s has no %s"
                                    % (mod_name, cls.__name__, name))
                for name in sim:
                    # What only the simulation has must not shadow a
                    # real name with another meaning.
                    self.assertFalse(
                        hasattr(real_cls, name) and name in (
                            "closed", "state", "done"),
                        "%s.%s" % (cls.__name__, name))

    def test_keywords_of_buildable_classes(self):
        for mod_name, members in fakeverbs.MODULES.items():
            for cls in members:
                if cls.__name__ not in BUILDABLE:
                    continue
                real_cls = self._real_class(mod_name, cls)
                for name in keywords(cls.__init__):
                    kwargs = dict(BUILDABLE[cls.__name__])
                    if name not in kwargs:
                        kwargs[name] = self._sample(name)
                    try:
                        real_cls(**kwargs)
                    except TypeError as exc:
                        if "keyword" in str(exc):
                            self.fail("pyverbs %s(%s=...): %s"
                                      % (cls.__name__, name, exc))
                    except Exception:  # noqa: B902 - accepted, then
                        pass           # refused for its sample value

    @staticmethod
    def _sample(name):
        if name in ("dgid",):
            return real("addr").GID("fe80:0000:0000:0000:0000:0000:0000:0001")
        if name == "gr":
            return real("addr").GlobalRoute()
        if name == "cap":
            return real("qp").QPCap()
        if name in ("sg",):
            return [real("wr").SGE(0x1000, 1, 1)]
        if name in ("val",):
            return "fe80:0000:0000:0000:0000:0000:0000:0001"
        if name in ("scq", "rcq", "srq", "qp_context"):
            return None
        return 1

    def test_keywords_of_device_classes(self):
        # These need a device to build: their documented parameters.
        for mod_name, cls in (("device", fakeverbs.Context),
                              ("pd", fakeverbs.PD), ("mr", fakeverbs.MR),
                              ("cq", fakeverbs.CQ), ("qp", fakeverbs.QP)):
            doc = self._real_class(mod_name, cls).__init__.__doc__ or ""
            documented = set(re.findall(r":param (\w+):", doc)) | set(
                re.findall(r"\* \*(\w+)\*", doc))
            for name in keywords(cls.__init__):
                self.assertIn(name, documented, "%s(%s=)"
                              % (cls.__name__, name))

    def test_rdma_uses_only_checked_modules(self):
        self.assertEqual(set(verbs.MODULES),
                         set(fakeverbs.MODULES) - {"pyverbs_error"})


class LoadTest(testcase.TestCase):

    def test_installed_pyverbs_loads(self):
        real("enums")
        v = verbs.load()
        self.assertEqual(4, int(v.e.IBV_ACCESS_REMOTE_READ))
        self.assertTrue(issubclass(v.error, Exception))
