"""The realistic development set: tasks made from real fixes between two releases of small
pure-Python packages on PyPI. The single source that build.py turns into tasks/real/<id>/.

Each task's base is the old release's sdist, its gold patch the fix as the new release has it,
its hidden tests the tests the new release added for that fix (copied verbatim: build.py checks
that every line either adds is in the new release's sdist). Edits are (path, old, new) text
replacements on the old release's tree; `old` must occur exactly once.

  name      short name; the instance id is real__<name>
  package   the PyPI name; old, new: the two releases (pinned by sha256 in SDISTS)
  layout    the shapes the task has (src layout, re-export, parametrize, TestCase, fixture,
            module constant, format spec), for the table in README.md
  loose     True when `wrong` passes every hidden and visible test (proven by validate.py,
            which also runs `probe` in the gold and the wrong tree and requires different output)
  gold      the real fix (edits)
  tests     the real tests for it (edits to the old release's test files; (path, None, None)
            takes the new release's file whole)
  wrong     an agent-style wrong patch (edits). Loose: passes every test. Sound: fails a hidden test
  tried     sound tasks: more agent-style wrong patches, each failing some hidden test
  probe     loose tasks: Python printing values on which gold and `wrong` differ
  statement the issue text (what a user reported)
"""

SDISTS = {
    "parse-1.20.0": "bd28bae37714b45d5894d77160a16e2be36b64a3b618c81168b3684676aa498b",
    "parse-1.20.1": "09002ca350ad42e76629995f71f7b518670bcf93548bdde3684fd55d2be51975",
    "parse-1.20.2": "b41d604d16503c79d81af5165155c0b20f6c8d6c559efa66b4b695c3e5a0a0ce",
    "semver-3.0.1": "9ec78c5447883c67b97f98c3b6212796708191d22e4ad30f4570f840171cbce1",
    "semver-3.0.2": "6253adb39c70f6e51afed2fa7152bcd414c411286088fb4b9effb133885ab4cc",
    "semver-3.0.3": "8769a03a93507fecdf19b6eefb08d5e95b462504871a61e29e09798822888c94",
    "more-itertools-9.0.0": "5a6257e40878ef0520b1803990e3e22303a41b5714006c32a3fd8304b26ea1ab",
    "more-itertools-9.1.0": "cabaa341ad0389ea83c17a94566a53ae4c9d07349861ecb14dc6d0345cf9ac5d",
    "more-itertools-10.2.0": "8fccb480c43d3e99a00087634c06dd02b0d50fbf088b380de5a41a015ec239e1",
    "more-itertools-10.3.0": "e5d93ef411224fbcef366a6e8ddc4c5781bc6359d43412a65dd5964e46111463",
    "more-itertools-10.5.0": "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
    "more-itertools-10.6.0": "2cd7fad1009c31cc9fb6a035108509e6547547a7a738374f10bd49a09eb3ee3b",
    "more-itertools-10.4.0": "fe0e63c4ab068eac62410ab05cccca2dc71ec44ba8ef29916a0090df061cf923",
    "cachetools-5.3.3": "ba29e2dfa0b8b556606f097407ed1aa62080ee108ab0dc5ec9d6a723a007d105",
    "cachetools-5.4.0": "b8adc2e7c07f105ced7bc56dbb6dfbe7c4a00acce20e2227b3f355be89bc6827",
    "cachetools-5.5.0": "2cc24fb4cbe39633fb7badd9db9ca6295d766d9c2995f245725a46715d050f2a",
    "humanize-4.2.0": "b79797c101f274a19ed7b5f0cd3aa65e1aa379868b974692a9d3129ccc311be2",
    "humanize-4.3.0": "0dfac79fe8c1c0c734c14177b07b857bad9ae30dd50daa0a14e2c3d8054ee0c4",
    "humanize-4.9.0": "582a265c931c683a7e9b8ed9559089dea7edcf6cc95be39a3cbc2c5d5ac2bcfa",
    "humanize-4.10.0": "06b6eb0293e4b85e8d385397c5868926820db32b9b654b932f57fa41c23c9978",
    "humanize-4.4.0": "efb2584565cc86b7ea87a977a15066de34cdedaf341b11c851cfcfd2b964779c",
    "humanize-4.5.0": "d6ed00ed4dc59a66df71012e3d69cf655d7d21b02112d435871998969e8aedc8",
    "boltons-23.0.0": "8c50a71829525835ca3c849c7ed2511610c972b4dddfcd41a4a5447222beb4b0",
    "boltons-23.1.0": "ab4023d57a69609f7742dcc21c12bb57f2970d278d315f28eb2d3110a64114a8",
    "termcolor-2.1.1": "67cee2009adc6449c650f6bcf3bdeed00c8ba53a8cda5362733c53e0a39fb70b",
    "termcolor-2.2.0": "dfc8ac3f350788f23b2947b3e6cfa5a53b630b612e6cd8965a015a776020b99a",
    "termcolor-2.4.0": "aab9e56047c8ac41ed798fa36d892a37aca6b3e9159f3e0c24bc64a9b3ac7b7a",
    "termcolor-2.5.0": "998d8d27da6d48442e8e1f016119076b690d962507531df4890fcd2db2ef8a6f",
    "pathspec-0.10.0": "01eecd304ba0e6eeed188ae5fa568e99ef10265af7fd9ab737d6412b4ee0ab85",
    "pathspec-0.10.1": "7ace6161b621d31e7902eb6b5ae148d12cfd23f4a249b9ffb6b9fee12084323d",
    "pathspec-0.12.0": "c57e16065a97b7beb175f13c84d27cb05f7b7315741c2fbd5de541042f4ea6e1",
    "pathspec-0.12.1": "a482d51503a1ab33b1c67a6c3813a26953dbdc71c31dacaef9a838c4e29f5712",
    "humanize-4.11.0": "e66f36020a2d5a974c504bd2555cf770621dbdbb6d82f94a6857c0b1ea2608be",
}

TASKS = []


def task(name, package, old, new, layout, loose, gold, tests, wrong, statement, tried=(), probe=None):
    TASKS.append(dict(name=name, package=package, old=old, new=new, layout=list(layout), loose=loose, gold=gold,
                      tests=tests, wrong=wrong, tried=list(tried), probe=probe, statement=statement))


# ------------------------------------------------------------------------------------------ parse

task(
    "parse_subsecond", "parse", "1.20.0", "1.20.1", ["module constant", "format spec"], True,
    gold=[("parse.py", '    "%f": "[0-9]{6}",', '    "%f": "[0-9]{1,6}",')],
    tests=[("tests/test_parse.py", '''    assert r.named["dt"] == datetime(2023, 11, 21, 13, 23, 27)


@pytest.mark.skipif(''', '''    assert r.named["dt"] == datetime(2023, 11, 21, 13, 23, 27)


def test_datetime_with_various_subsecond_precision():
    r = parse.parse("{dt:%Y-%m-%d %H:%M:%S.%f}", "2023-11-21 13:23:27.123456")
    assert r.named["dt"] == datetime(2023, 11, 21, 13, 23, 27, 123456)

    r = parse.parse("{dt:%Y-%m-%d %H:%M:%S.%f}", "2023-11-21 13:23:27.12345")
    assert r.named["dt"] == datetime(2023, 11, 21, 13, 23, 27, 123450)

    r = parse.parse("{dt:%Y-%m-%d %H:%M:%S.%f}", "2023-11-21 13:23:27.1234")
    assert r.named["dt"] == datetime(2023, 11, 21, 13, 23, 27, 123400)

    r = parse.parse("{dt:%Y-%m-%d %H:%M:%S.%f}", "2023-11-21 13:23:27.123")
    assert r.named["dt"] == datetime(2023, 11, 21, 13, 23, 27, 123000)

    r = parse.parse("{dt:%Y-%m-%d %H:%M:%S.%f}", "2023-11-21 13:23:27.0")
    assert r.named["dt"] == datetime(2023, 11, 21, 13, 23, 27, 0)


@pytest.mark.skipif(''')],
    # the quantifier opened at both ends: seven digits and more now match %f
    wrong=[("parse.py", '    "%f": "[0-9]{6}",', '    "%f": "[0-9]+",')],
    probe='import parse\nfor s in ("13:23:27.1234567", "13:23:27.12"):\n    try:\n        print(repr(parse.parse("{dt:%H:%M:%S.%f}", s)))\n    except Exception as e:\n        print(type(e).__name__)',
    statement="Parsing a datetime with `%f` only works with exactly six digits of fractional seconds.\n\n"
              "`parse.parse(\"{dt:%Y-%m-%d %H:%M:%S.%f}\", \"2023-11-21 13:23:27.123\")` returns None. "
              "`datetime.strptime` accepts one to six digits for `%f`; parse should too.\n",
)

task(
    "parse_format_property", "parse", "1.20.0", "1.20.1", ["read-only property"], False,
    gold=[("parse.py", '''        return self._fixed_fields.copy()

''', '''        return self._fixed_fields.copy()

    @property
    def format(self):
        return self._format

''')],
    tests=[("tests/test_parse.py", '''    [res] = parse.parse("{:" + fmt + "}", s)
    assert res == dt
''', '''    [res] = parse.parse("{:" + fmt + "}", s)
    assert res == dt


def test_parser_format():
    parser = parse.compile("hello {}")
    assert parser.format.format("world") == "hello world"
    with pytest.raises(AttributeError):
        parser.format = "hi {}"
''')],
    # a plain attribute: readable, but writable too
    wrong=[("parse.py", '''        return self._fixed_fields.copy()

''', '''        return self._fixed_fields.copy()

    def __getattr__(self, name):
        if name == "format":
            return self._format
        raise AttributeError(name)

''')],
    tried=[[("parse.py", '''        return self._fixed_fields.copy()

''', '''        return self._fixed_fields.copy()

    @property
    def format(self):
        return self._expression

''')]],
    statement="Expose the format string a Parser was compiled from.\n\n"
              "`parse.compile(\"hello {}\")` keeps its format in a private attribute. Please add a read-only "
              "`format` property so that `parser.format.format(\"world\")` gives `\"hello world\"`; assigning to it "
              "should raise AttributeError.\n",
)

task(
    "parse_hyphen_field", "parse", "1.20.1", "1.20.2", ["module constant", "one branch of several"], True,
    gold=[("parse.py", r'''PARSE_RE = re.compile(r"({{|}}|{\w*(?:\.\w+|\[[^]]+])*(?::[^}]+)?})")''',
           r'''PARSE_RE = re.compile(r"({{|}}|{[\w-]*(?:\.[\w-]+|\[[^]]+])*(?::[^}]+)?})")'''),
          ("parse.py", '''        group = field.replace(".", "_").replace("[", "_").replace("]", "_")
''', '''        group = field.replace(".", "_").replace("[", "_").replace("]", "_").replace("-", "_")
'''),
          ("parse.py", '''                group = field.replace("_", "_" * n)
''', '''                group = field.replace("_", "_" * n)
            elif "-" in field:
                group = field.replace("-", "_" * n)
''')],
    tests=[("tests/test_parse.py", '''def test_parser_format():''', '''def test_hyphen_inside_field_name():
    # https://github.com/r1chardj0n3s/parse/issues/86
    # https://github.com/python-openapi/openapi-core/issues/672
    template = "/local/sub/{user-id}/duration"
    assert parse.Parser(template).named_fields == ["user_id"]
    string = "https://dummy_server.com/local/sub/1647222638/duration"
    result = parse.search(template, string)
    assert result["user-id"] == "1647222638"


def test_hyphen_inside_field_name_collision_handling():
    template = "/foo/{user-id}/{user_id}/{user.id}/bar/"
    assert parse.Parser(template).named_fields == ["user_id", "user__id", "user___id"]
    string = "/foo/1/2/3/bar/"
    result = parse.search(template, string)
    assert result["user-id"] == "1"
    assert result["user_id"] == "2"
    assert result["user.id"] == "3"


def test_parser_format():''')],
    # the pattern and the group name, but not the collision branch for hyphenated fields
    wrong=[("parse.py", r'''PARSE_RE = re.compile(r"({{|}}|{\w*(?:\.\w+|\[[^]]+])*(?::[^}]+)?})")''',
            r'''PARSE_RE = re.compile(r"({{|}}|{[\w-]*(?:\.[\w-]+|\[[^]]+])*(?::[^}]+)?})")'''),
           ("parse.py", '''        group = field.replace(".", "_").replace("[", "_").replace("]", "_")
''', '''        group = field.replace(".", "_").replace("[", "_").replace("]", "_").replace("-", "_")
''')],
    probe='import parse\ntry:\n    print(parse.Parser("/{user_id}/{user-id}/").named_fields)\nexcept Exception as e:\n    print(type(e).__name__, e)',
    statement="Field names with a hyphen are not recognised.\n\n"
              "`parse.search(\"/local/sub/{user-id}/duration\", url)` returns None: `{user-id}` is not taken as a "
              "field. OpenAPI path templates use such names. A field named `user-id` should be captured and "
              "read back as `result[\"user-id\"]`, even when the template has other fields whose names "
              "differ only in `-`, `_` or `.`.\n",
)

# ----------------------------------------------------------------------------------------- semver

task(
    "semver_replace_subclass", "semver", "3.0.1", "3.0.2", ["src layout", "re-export", "method"], False,
    gold=[("src/semver/version.py", "            return Version(**version)  # type: ignore",
           "            return type(self)(**version)  # type: ignore")],
    tests=[("tests/test_subclass.py", '''    v = SemVerWithVPrefix.parse("v1.2.3")
    assert str(v) == "v1.2.3"
''', '''    v = SemVerWithVPrefix.parse("v1.2.3")
    assert str(v) == "v1.2.3"


def test_replace_from_subclass():
    # Issue#426
    # Taken from the example "Creating Subclasses from Version"
    class SemVerWithVPrefix(Version):
        """
        A subclass of Version which allows a "v" prefix
        """

        @classmethod
        def parse(cls, version: str) -> "SemVerWithVPrefix":
            """
            Parse version string to a Version instance.

            :param version: version string with "v" or "V" prefix
            :raises ValueError: when version does not start with "v" or "V"
            :return: a new instance
            """
            if not version[0] in ("v", "V"):
                raise ValueError(
                    f"{version!r}: not a valid semantic version tag. "
                    "Must start with 'v' or 'V'"
                )
            return super().parse(version[1:], optional_minor_and_patch=True)

        def __str__(self) -> str:
            # Reconstruct the tag
            return "v" + super().__str__()

    version = SemVerWithVPrefix.parse("v1.1.0")
    dev_version = version.replace(prerelease="dev.0")

    assert str(dev_version) == "v1.1.0-dev.0"
''')],
    # the class looked up by name in the module: still Version
    wrong=[("src/semver/version.py", "            return Version(**version)  # type: ignore",
            "            return globals()[type(self).__base__.__name__ if type(self) is not Version else 'Version'](**version)  # type: ignore")],
    tried=[[("src/semver/version.py", "            return Version(**version)  # type: ignore",
             "            return Version.parse(str(Version(**version)))  # type: ignore")]],
    statement="`Version.replace()` on a subclass returns a plain `Version`.\n\n"
              "With the subclass `SemVerWithVPrefix` from the documentation, `SemVerWithVPrefix.parse(\"v1.1.0\")"
              ".replace(prerelease=\"dev.0\")` prints as `1.1.0-dev.0`; it should stay a `SemVerWithVPrefix` and "
              "print `v1.1.0-dev.0`.\n",
)

task(
    "semver_compare_subclass", "semver", "3.0.2", "3.0.3", ["src layout", "decorator", "method", "one call site of several"], True,
    gold=[("src/semver/version.py", '''        comparable_types = (
            Version,''', '''        comparable_types = (
            type(self),''')],
    tests=[("tests/test_subclass.py", '''from semver import Version
''', '''import pytest

from semver import Version
'''), ("tests/test_subclass.py", '''    assert str(dev_version) == "v1.1.0-dev.0"
''', '''    assert str(dev_version) == "v1.1.0-dev.0"


def test_compare_with_subclass():
    class SemVerSubclass(Version):
        pass

    with pytest.raises(TypeError):
        SemVerSubclass.parse("1.0.0").compare(Version.parse("1.0.0"))
    assert Version.parse("1.0.0").compare(SemVerSubclass.parse("1.0.0")) == 0

    assert (
        SemVerSubclass.parse("1.0.0").__eq__(Version.parse("1.0.0")) is NotImplemented
    )
    assert Version.parse("1.0.0").__eq__(SemVerSubclass.parse("1.0.0")) is True

    assert SemVerSubclass.parse("1.0.0") == Version.parse("1.0.0")
    assert Version.parse("1.0.0") == SemVerSubclass.parse("1.0.0")
''')],
    # only __eq__ checked against the subclass; the other comparisons left as they were
    wrong=[("src/semver/version.py", '''    @_comparator
    def __eq__(self, other: Comparable) -> bool:  # type: ignore
        return self.compare(other) == 0''', '''    def __eq__(self, other: Comparable) -> bool:  # type: ignore
        if not isinstance(other, (type(self), dict, tuple, list, *String.__args__)):  # type: ignore
            return NotImplemented
        return self.compare(other) == 0''')],
    probe='import operator\nfrom semver import Version\nclass Sub(Version):\n    pass\nfor op in ("lt", "ne", "ge"):\n    try:\n        print(op, getattr(operator, op)(Sub.parse("1.0.0"), Version.parse("2.0.0")))\n    except Exception as e:\n        print(op, type(e).__name__)',
    statement="Comparing a `Version` subclass with a `Version` raises TypeError.\n\n"
              "`SemVerSubclass.parse(\"1.0.0\") == Version.parse(\"1.0.0\")` raises `TypeError: Expected str, bytes, "
              "dict, tuple, list, or SemVerSubclass instance`. The comparison operators should return "
              "NotImplemented for types they cannot compare, so that Python tries the reflected operation.\n",
)

# --------------------------------------------------------------------------------------- humanize

task(
    "humanize_intword_negative", "humanize", "4.2.0", "4.3.0", ["src layout", "re-export", "parametrize", "one call site of several"], True,
    gold=[("src/humanize/number.py", '''        return str(value)

    if value < powers[0]:
        return str(value)
    for ordinal, power in enumerate(powers[1:], 1):
        if value < power:
            chopped = value / float(powers[ordinal - 1])
            if float(format % chopped) == float(10**3):
                chopped = value / float(powers[ordinal])
                singular, plural = human_powers[ordinal]
                return (
                    " ".join([format, _ngettext(singular, plural, math.ceil(chopped))])
                ) % chopped
            else:
                singular, plural = human_powers[ordinal - 1]
                return (
                    " ".join([format, _ngettext(singular, plural, math.ceil(chopped))])
                ) % chopped
    return str(value)
''', '''        return str(value)

    if value < 0:
        value *= -1
        negative_prefix = "-"
    else:
        negative_prefix = ""

    if value < powers[0]:
        return negative_prefix + str(value)
    for ordinal, power in enumerate(powers[1:], 1):
        if value < power:
            chopped = value / float(powers[ordinal - 1])
            if float(format % chopped) == float(10**3):
                chopped = value / float(powers[ordinal])
                singular, plural = human_powers[ordinal]
                return (
                    negative_prefix
                    + " ".join(
                        [format, _ngettext(singular, plural, math.ceil(chopped))]
                    )
                ) % chopped
            else:
                singular, plural = human_powers[ordinal - 1]
                return (
                    negative_prefix
                    + " ".join(
                        [format, _ngettext(singular, plural, math.ceil(chopped))]
                    )
                ) % chopped

    return negative_prefix + str(value)
''')],
    tests=[("tests/test_number.py", '''        (["100"], "100"),
        (["1000"], "1.0 thousand"),''', '''        (["0"], "0"),
        (["100"], "100"),
        (["-100"], "-100"),
        (["1000"], "1.0 thousand"),'''),
           ("tests/test_number.py", '''        (["1000000"], "1.0 million"),
        (["1200000"], "1.2 million"),''', '''        (["1000000"], "1.0 million"),
        (["-1000000"], "-1.0 million"),
        (["1200000"], "1.2 million"),'''),
           ("tests/test_number.py", '''        (["1000000000"], "1.0 billion"),
        (["2000000000"], "2.0 billion"),''', '''        (["1000000000"], "1.0 billion"),
        (["-1000000000"], "-1.0 billion"),
        (["2000000000"], "2.0 billion"),'''),
           ("tests/test_number.py", '''        (["6000000000000"], "6.0 trillion"),
''', '''        (["6000000000000"], "6.0 trillion"),
        (["-6000000000000"], "-6.0 trillion"),
'''),
           ("tests/test_number.py", '''        (["1300000000000000"], "1.3 quadrillion"),
        (["3500000000000000000000"], "3.5 sextillion"),
        (["8100000000000000000000000000000000"], "8.1 decillion"),
''', '''        (["1300000000000000"], "1.3 quadrillion"),
        (["-1300000000000000"], "-1.3 quadrillion"),
        (["3500000000000000000000"], "3.5 sextillion"),
        (["8100000000000000000000000000000000"], "8.1 decillion"),
        (["-8100000000000000000000000000000000"], "-8.1 decillion"),
''')],
    # the sign restored in the common branch only, not where the value rounds up to the next power
    wrong=[("src/humanize/number.py", '''        return str(value)

    if value < powers[0]:
        return str(value)''', '''        return str(value)

    negative_prefix = "-" if value < 0 else ""
    value = abs(value)
    if value < powers[0]:
        return negative_prefix + str(value)'''),
           ("src/humanize/number.py", '''                singular, plural = human_powers[ordinal - 1]
                return (
                    " ".join([format, _ngettext(singular, plural, math.ceil(chopped))])''', '''                singular, plural = human_powers[ordinal - 1]
                return negative_prefix + (
                    " ".join([format, _ngettext(singular, plural, math.ceil(chopped))])''')],
    probe='import humanize\nprint(humanize.intword(-999_999_999), humanize.intword(-999_950))',
    statement="intword() ignores negative numbers.\n\n"
              "`humanize.intword(-1000000)` returns `'-1000000'`; `intword(1000000)` returns `'1.0 million'`. "
              "Negative numbers should read the same with a minus sign: `'-1.0 million'`.\n",
)

task(
    "humanize_intcomma_ndigits", "humanize", "4.2.0", "4.3.0", ["src layout", "re-export", "parametrize", "format spec"], False,
    gold=[("src/humanize/number.py", "    if ndigits:\n", "    if ndigits is not None:\n")],
    tests=[("tests/test_number.py", '''        ([1234.5454545, None], "1,234.5454545"),
''', '''        ([1234.5454545, None], "1,234.5454545"),
        ([1234.5454545, 0], "1,235"),
''')],
    # truncating to an int for ndigits=0
    wrong=[("src/humanize/number.py", "    if ndigits:\n", "    if ndigits == 0:\n        value = int(float(value))\n    if ndigits:\n")],
    tried=[[("src/humanize/number.py", "    if ndigits:\n", "    if ndigits is not None and ndigits > 0:\n")]],
    statement="intcomma(value, 0) ignores ndigits=0.\n\n"
              "`humanize.intcomma(1234.5454545, 0)` returns `'1,234.5454545'`; with `ndigits=0` it should round to "
              "no decimals: `'1,235'`.\n",
)

task(
    "humanize_metric_precision", "humanize", "4.9.0", "4.10.0", ["src layout", "re-export", "parametrize", "format spec"], False,
    gold=[("src/humanize/number.py", '    value_ = format(value, ".%if" % (precision - (exponent % 3) - 1))',
           '    value_ = format(value, ".%if" % max(0, precision - (exponent % 3) - 1))')],
    tests=[("tests/test_number.py", '''        ([0.1], "100 m"),
        ([math.nan], "NaN"),''', '''        ([0.1], "100 m"),
        ([1.5123, "", 0], "2"),
        ([10.5123, "", 0], "11"),
        ([10.5123, "", 1], "11"),
        ([10.5123, "", 2], "11"),
        ([10.5123, "", 3], "10.5"),
        ([1, "", 0], "1"),
        ([10, "", 0], "10"),
        ([100, "", 0], "100"),
        ([1000, "", 0], "1 k"),
        ([1, "", 1], "1"),
        ([10, "", 1], "10"),
        ([100, "", 1], "100"),
        ([1000, "", 1], "1 k"),
        ([1, "", 2], "1.0"),
        ([10, "", 2], "10"),
        ([100, "", 2], "100"),
        ([1000, "", 2], "1.0 k"),
        ([1, "", 3], "1.00"),
        ([10, "", 3], "10.0"),
        ([100, "", 3], "100"),
        ([1000, "", 3], "1.00 k"),
        ([math.nan], "NaN"),''')],
    # the negative digit count folded to its size instead of clamped at zero
    wrong=[("src/humanize/number.py", '    value_ = format(value, ".%if" % (precision - (exponent % 3) - 1))',
            '    value_ = format(value, ".%if" % abs(precision - (exponent % 3) - 1))')],
    tried=[[("src/humanize/number.py", '    value_ = format(value, ".%if" % (precision - (exponent % 3) - 1))',
             '    value_ = format(value, ".%if" % max(1, precision - (exponent % 3) - 1))')],
           [("src/humanize/number.py", '    value_ = format(value, ".%if" % (precision - (exponent % 3) - 1))',
             '    value_ = format(value, ".%if" % max(0, precision - (exponent % 3)))')]],
    statement="metric() fails for small precision.\n\n"
              "`humanize.metric(10.5123, \"\", 1)` raises `ValueError: Format specifier missing precision`: the "
              "number of decimals goes negative. It should give `'11'`; `metric(1.5123, \"\", 0)` should give `'2'`.\n",
)

# --------------------------------------------------------------------------------- more-itertools

task(
    "more_itertools_split_after", "more-itertools", "9.0.0", "9.1.0", ["re-export", "TestCase", "subTest-style loop"], True,
    gold=[("more_itertools/more.py", """        if pred(item) and buf:
            yield buf
            if maxsplit == 1:
                yield list(it)
                return
            buf = []
            maxsplit -= 1
    if buf:
        yield buf


def split_when(""", """        if pred(item) and buf:
            yield buf
            if maxsplit == 1:
                buf = list(it)
                if buf:
                    yield buf
                return
            buf = []
            maxsplit -= 1
    if buf:
        yield buf


def split_when(""")],
    tests=[("tests/test_more.py", """            (
                ('a,b,c,d', lambda c: c != ',', 2),
                [['a'], [',', 'b'], [',', 'c', ',', 'd']],
            ),
        ]:
            actual = list(mi.split_after(*args))""", """            (
                ('a,b,c,d', lambda c: c != ',', 2),
                [['a'], [',', 'b'], [',', 'c', ',', 'd']],
            ),
            (
                ([1], lambda x: x == 1, 1),
                [[1]],
            ),
        ]:
            actual = list(mi.split_after(*args))""")],
    # an empty tail dropped, and a tail of one item with it (the guard off by one)
    wrong=[("more_itertools/more.py", """            if maxsplit == 1:
                yield list(it)
                return
            buf = []
            maxsplit -= 1
    if buf:
        yield buf


def split_when(""", """            if maxsplit == 1:
                rest = list(it)
                if len(rest) > 1:
                    yield rest
                return
            buf = []
            maxsplit -= 1
    if buf:
        yield buf


def split_when(""")],
    probe="import more_itertools as mi\nprint(list(mi.split_after('a,b', lambda c: c == ',', 1)))",
    statement="split_after() with maxsplit=1 yields an empty list at the end.\n\n"
              "`list(split_after([1], lambda x: x == 1, maxsplit=1))` gives `[[1], []]`; without maxsplit it gives "
              "`[[1]]`. An empty remainder should not be yielded.\n",
)

# ------------------------------------------------------------------------------------- cachetools

task(
    "cachetools_typedmethodkey", "cachetools", "5.3.3", "5.4.0", ["src layout", "re-export", "TestCase", "decorator"], True,
    gold=[("src/cachetools/keys.py", '__all__ = ("hashkey", "methodkey", "typedkey")', '__all__ = ("hashkey", "methodkey", "typedkey", "typedmethodkey")'),
          ("src/cachetools/keys.py", """    key += tuple(type(v) for _, v in sorted(kwargs.items()))
    return key
""", """    key += tuple(type(v) for _, v in sorted(kwargs.items()))
    return key


def typedmethodkey(self, *args, **kwargs):
    \"\"\"Return a typed cache key for use with cached methods.\"\"\"
    return typedkey(*args, **kwargs)
""")],
    tests=[("tests/test_cachedmethod.py", None, None)],
    # the instance kept in the key: a cache shared by several instances no longer shares entries
    wrong=[("src/cachetools/keys.py", '__all__ = ("hashkey", "methodkey", "typedkey")', '__all__ = ("hashkey", "methodkey", "typedkey", "typedmethodkey")'),
           ("src/cachetools/keys.py", """    key += tuple(type(v) for _, v in sorted(kwargs.items()))
    return key
""", """    key += tuple(type(v) for _, v in sorted(kwargs.items()))
    return key


def typedmethodkey(self, *args, **kwargs):
    \"\"\"Return a typed cache key for use with cached methods.\"\"\"
    return typedkey(self, *args, **kwargs)
""")],
    probe="from cachetools import keys\nprint(keys.typedmethodkey('x', 1) == keys.typedmethodkey('y', 1))",
    statement="No typed key for cached methods.\n\n"
              "`cachedmethod(..., key=keys.typedkey)` puts `self` into the key, so a cache shared by instances "
              "never hits across them, and `keys.methodkey` is not typed. Add `keys.typedmethodkey`: like "
              "`methodkey` (the first argument ignored) but typed like `typedkey` (1 and 1.0 are different keys).\n",
)

task(
    "cachetools_expire_items", "cachetools", "5.4.0", "5.5.0", ["src layout", "TestCase", "mixin", "one call site of several"], True,
    gold=[("src/cachetools/__init__.py", """        links = self.__links
        cache_delitem = Cache.__delitem__
        while curr is not root and not (time < curr.expires):
            cache_delitem(self, curr.key)
            del links[curr.key]
            next = curr.next
            curr.unlink()
            curr = next
""", """        links = self.__links
        expired = []
        cache_delitem = Cache.__delitem__
        cache_getitem = Cache.__getitem__
        while curr is not root and not (time < curr.expires):
            expired.append((curr.key, cache_getitem(self, curr.key)))
            cache_delitem(self, curr.key)
            del links[curr.key]
            next = curr.next
            curr.unlink()
            curr = next
        return expired
"""), ("src/cachetools/__init__.py", """        cache_delitem = Cache.__delitem__
        while order and (order[0].removed or not (time < order[0].expires)):
            item = heapq.heappop(order)
            if not item.removed:
                cache_delitem(self, item.key)
                del items[item.key]
""", """        expired = []
        cache_delitem = Cache.__delitem__
        cache_getitem = Cache.__getitem__
        while order and (order[0].removed or not (time < order[0].expires)):
            item = heapq.heappop(order)
            if not item.removed:
                expired.append((item.key, cache_getitem(self, item.key)))
                cache_delitem(self, item.key)
                del items[item.key]
        return expired
""")],
    tests=[("tests/test_ttl.py", None, None), ("tests/test_tlru.py", None, None)],
    # the key looked up as the value: the tests store every key as its own value, so they cannot
    # tell (found by floe's candidates run on the host: the set first labelled this task sound, with the patch below
    # as its wrong patch, which the TLRU tests reject)
    wrong=[("src/cachetools/__init__.py", """        links = self.__links
        cache_delitem = Cache.__delitem__
        while curr is not root and not (time < curr.expires):
            cache_delitem(self, curr.key)
            del links[curr.key]
            next = curr.next
            curr.unlink()
            curr = next
""", """        links = self.__links
        expired = []
        cache_delitem = Cache.__delitem__
        while curr is not root and not (time < curr.expires):
            expired.append((curr.key, curr.key))
            cache_delitem(self, curr.key)
            del links[curr.key]
            next = curr.next
            curr.unlink()
            curr = next
        return expired
"""), ("src/cachetools/__init__.py", """        cache_delitem = Cache.__delitem__
        while order and (order[0].removed or not (time < order[0].expires)):
            item = heapq.heappop(order)
            if not item.removed:
                cache_delitem(self, item.key)
                del items[item.key]
""", """        expired = []
        cache_delitem = Cache.__delitem__
        while order and (order[0].removed or not (time < order[0].expires)):
            item = heapq.heappop(order)
            if not item.removed:
                expired.append((item.key, item.key))
                cache_delitem(self, item.key)
                del items[item.key]
        return expired
""")],
    probe="import cachetools\nc = cachetools.TTLCache(maxsize=2, ttl=1, timer=lambda: 0)\nc[1] = 'one'\nprint(list(c.expire(5)))",
    statement="TTLCache.expire() and TLRUCache.expire() should return what they removed.\n\n"
              "`cache.expire()` returns None, so code that must clean up expired values (close connections) "
              "cannot see them. It should return an iterable of the expired `(key, value)` pairs.\n",
)

task(
    "more_itertools_all_equal_key", "more-itertools", "10.2.0", "10.3.0", ["re-export", "TestCase", "keyword argument"], True,
    gold=[("more_itertools/recipes.py", "def all_equal(iterable):", "def all_equal(iterable, key=None):"),
          ("more_itertools/recipes.py", """    g = groupby(iterable)
    return next(g, True) and not next(g, False)""", """    return len(list(islice(groupby(iterable, key), 2))) <= 1""")],
    tests=[("tests/test_recipes.py", """        self.assertTrue(mi.all_equal('0'))
        self.assertTrue(mi.all_equal([0]))
""", """        self.assertTrue(mi.all_equal('0'))
        self.assertTrue(mi.all_equal([0]))

    def test_key(self):
        self.assertTrue(mi.all_equal('4٤໔４৪', key=int))
        self.assertFalse(mi.all_equal('Abc', key=str.casefold))
""")],
    # the items collected in a set: unhashable items (lists) now raise TypeError
    wrong=[("more_itertools/recipes.py", "def all_equal(iterable):", "def all_equal(iterable, key=None):"),
           ("more_itertools/recipes.py", """    g = groupby(iterable)
    return next(g, True) and not next(g, False)""", """    return len(set(map(key, iterable)) if key else set(iterable)) <= 1""")],
    probe="import more_itertools as mi\ntry:\n    print(mi.all_equal([[1], [1]]))\nexcept Exception as e:\n    print(type(e).__name__)",
    statement="all_equal() has no key.\n\n"
              "`all_equal('Abc', key=str.casefold)` raises TypeError. Like `groupby`, it should take a *key* that "
              "transforms each item before comparing: `all_equal('AaaA', key=str.casefold)` is True.\n",
)

# ------------------------------------------------------------------- humanize: more sound tasks

_HN = "src/humanize/number.py"
_NOT_FINITE_HELPER = '''def _format_not_finite(value: float) -> str:
    """Utility function to handle infinite and nan cases."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value) and value < 0:
        return "-Inf"
    if math.isinf(value) and value > 0:
        return "+Inf"
    return ""
'''


def _not_finite(helper=_NOT_FINITE_HELPER, check="if not math.isfinite({x}):", skip=(), metric_tail=""):
    """The 4.5.0 fix's edits (the gold with the defaults): a helper, and a check before each
    function converts its input. A wrong patch's: `skip` leaves functions out, `check` is another
    test, `metric_tail` is added to metric's return."""
    def guard(indent, x):
        return f"{indent}{check.format(x=x)}\n{indent}    return _format_not_finite({x}){tail}\n"
    edits = [(_HN, 'NumberOrString: TypeAlias = "float | str"\n\n\ndef ordinal(',
              'NumberOrString: TypeAlias = "float | str"\n\n\n' + helper + '\n\ndef ordinal(')]
    tail = ""
    sites = [
        ("ordinal", '        str: Ordinal string.\n    """\n    try:\n', "        value = int(value)", "        ", "float(value)"),
        ("intcomma", '            value = value.replace(thousands_sep, "").replace(decimal_sep, ".")\n', '            if "." in value:', "            ", "float(value)"),
        ("intcomma", "                value = int(value)\n        else:\n", "            float(value)", "            ", "float(value)"),
        ("intword", '        be coaxed into an `int`.\n    """\n    try:\n', "        value = int(value)", "        ", "float(value)"),
        ("apnumber", '        is returned.\n    """\n    try:\n', "        value = int(value)", "        ", "float(value)"),
        ("fractional", "        number = float(value)\n", "    except (TypeError, ValueError):\n        return str(value)\n    whole_number", "        ", "number"),
        ("scientific", "        value = float(value)\n", "    except (ValueError, TypeError):", "        ", "value"),
        ("clamp", "    if value is None:\n        return None\n\n", "    if floor", "    ", "value"),
        ("metric", '        str:\n    """\n', "    exponent = int(math.floor", "    ", "value"),
    ]
    for name, before, after, indent, x in sites:
        if name in skip:
            continue
        tail = metric_tail if name == "metric" else ""
        edits.append((_HN, before + after, before + guard(indent, x) + ("\n" if name == "clamp" else "") + after))
    return edits


task(
    "humanize_not_finite", "humanize", "4.4.0", "4.5.0",
    ["src layout", "re-export", "parametrize", "one call site of several"], True,
    gold=_not_finite(),
    tests=[("tests/test_number.py", "\nimport typing\n", "\nimport math\nimport typing\n"),
           ("tests/test_number.py", '''        ("something else", "something else"),
        (None, "None"),
''', '''        ("something else", "something else"),
        (None, "None"),
        (math.nan, "NaN"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        ("nan", "NaN"),
        ("-inf", "-Inf"),
'''),
           ("tests/test_number.py", '''        ([1234.5454545, 10], "1,234.5454545000"),
''', '''        ([1234.5454545, 10], "1,234.5454545000"),
        ([math.nan], "NaN"),
        ([math.inf], "+Inf"),
        ([-math.inf], "-Inf"),
        (["nan"], "NaN"),
        (["-inf"], "-Inf"),
'''),
           ("tests/test_number.py", '''        ([10**101], "1" + "0" * 101),
''', '''        ([10**101], "1" + "0" * 101),
        ([math.nan], "NaN"),
        ([math.inf], "+Inf"),
        ([-math.inf], "-Inf"),
        (["nan"], "NaN"),
        (["-inf"], "-Inf"),
'''),
           ("tests/test_number.py", '''        ("7", "seven"),
        (None, "None"),
''', '''        ("7", "seven"),
        (None, "None"),
        (math.nan, "NaN"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        ("nan", "NaN"),
        ("-inf", "-Inf"),
'''),
           ("tests/test_number.py", '''        (0.333, "333/1000"),
''', '''        (0.333, "333/1000"),
        (math.nan, "NaN"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        ("nan", "NaN"),
        ("-inf", "-Inf"),
'''),
           ("tests/test_number.py", '''        ([float(-4e-20)], "-4.00 x 10⁻²⁰"),
''', '''        ([float(-4e-20)], "-4.00 x 10⁻²⁰"),
        ([math.nan], "NaN"),
        ([math.inf], "+Inf"),
        ([-math.inf], "-Inf"),
        (["nan"], "NaN"),
        (["-inf"], "-Inf"),
'''),
           ("tests/test_number.py", '''"under 1.0 million"),
''', '''"under 1.0 million"),
        ([math.nan], "NaN"),
        ([math.inf], "+Inf"),
        ([-math.inf], "-Inf"),
'''),
           ("tests/test_number.py", '''        ([0.1], "100 m"),
''', '''        ([0.1], "100 m"),
        ([math.nan], "NaN"),
        ([math.nan, "m"], "NaN"),
        ([math.inf], "+Inf"),
        ([-math.inf], "-Inf"),
'''),
           ],
    # the spellings the tests use matched as text: "+inf", "Infinity" or "1e400" still go through
    # int()/float() (written down as sound with the patches in `tried`, which all fail; this one
    # passes every test)
    wrong=_not_finite(check='if str(value).lower() in ("nan", "inf", "-inf"):'),
    probe='import humanize\nfor f, v in ((humanize.intword, "+inf"), (humanize.ordinal, "Infinity"), (humanize.fractional, "1e400")):\n    try:\n        print(f.__name__, repr(f(v)))\n    except Exception as e:\n        print(f.__name__, type(e).__name__)',
    tried=[
        # the functions that parse their input guarded; clamp() and metric(), which take a number, left out
        _not_finite(skip=("clamp", "metric")),
        # "Inf" for positive infinity (the sign only on the negative one)
        _not_finite(helper=_NOT_FINITE_HELPER.replace('return "+Inf"', 'return "Inf"')),
        # only float inputs guarded: the strings "nan" and "-inf" still go through int()/float() paths
        _not_finite(check="if isinstance(value, float) and not math.isfinite(value):"),
        # metric keeps its unit: "NaNm"
        _not_finite(metric_tail=" + unit"),
    ],
    statement="Number functions mishandle NaN and infinity.\n\n"
              "`humanize.intword(float(\"inf\"))` raises OverflowError, `humanize.metric(math.nan)` raises "
              "ValueError and `humanize.ordinal(math.nan)` returns `'nan'`. Every number function (ordinal, "
              "intcomma, intword, apnumber, fractional, scientific, clamp, metric) should return `'NaN'`, "
              "`'+Inf'` or `'-Inf'` for not-finite input, whether given as a float or as a string like "
              "`\"nan\"` or `\"-inf\"`; metric drops its unit for them.\n",
)

_HF = "src/humanize/filesize.py"
_SUFFIXES_410 = '''suffixes = {
    "decimal": (" kB", " MB", " GB", " TB", " PB", " EB", " ZB", " YB"),
    "binary": (" KiB", " MiB", " GiB", " TiB", " PiB", " EiB", " ZiB", " YiB"),
    "gnu": "KMGTPEZY",
}'''

task(
    "humanize_naturalsize_ronna", "humanize", "4.10.0", "4.11.0",
    ["src layout", "re-export", "parametrize", "module constant"], False,
    gold=[(_HF, _SUFFIXES_410, '''suffixes = {
    "decimal": (
        " kB",
        " MB",
        " GB",
        " TB",
        " PB",
        " EB",
        " ZB",
        " YB",
        " RB",
        " QB",
    ),
    "binary": (
        " KiB",
        " MiB",
        " GiB",
        " TiB",
        " PiB",
        " EiB",
        " ZiB",
        " YiB",
        " RiB",
        " QiB",
    ),
    "gnu": "KMGTPEZYRQ",
}'''),
          (_HF, "like a human readable filesize", "like a human-readable filesize"),
          (_HF, """        >>> naturalsize(10**28)
        '10000.0 YB'
""", """        >>> naturalsize(10**28)
        '10.0 RB'
        >>> naturalsize(10**34 * 3)
        '30000.0 QB'
"""),
          (_HF, """    bytes_ = float(value)
    abs_bytes = abs(bytes_)

    if abs_bytes == 1 and not gnu:
        return "%d Byte" % bytes_

    if abs_bytes < base and not gnu:
        return "%d Bytes" % bytes_

    if abs_bytes < base and gnu:
        return "%dB" % bytes_

    for i, s in enumerate(suffix):
        unit = base ** (i + 2)

        if abs_bytes < unit:""", """    if isinstance(value, str):
        bytes_ = float(value)
    else:
        bytes_ = value

    abs_bytes = abs(bytes_)

    if abs_bytes == 1 and not gnu:
        return "%d Byte" % bytes_

    if abs_bytes < base:
        return ("%dB" if gnu else "%d Bytes") % bytes_

    for i, s in enumerate(suffix, 2):
        unit = base**i
        if abs_bytes < unit:""")],
    tests=[("tests/test_filesize.py", None, None)],
    # the ronna and quetta suffixes added to the decimal table only
    wrong=[(_HF, _SUFFIXES_410, _SUFFIXES_410.replace('" ZB", " YB")', '" ZB", " YB", " RB", " QB")'))],
    tried=[
        # decimal and binary, but not the GNU letters
        [(_HF, _SUFFIXES_410, _SUFFIXES_410.replace('" ZB", " YB")', '" ZB", " YB", " RB", " QB")')
          .replace('" ZiB", " YiB")', '" ZiB", " YiB", " RiB", " QiB")'))],
        # all three tables, the binary ones spelled like the decimal ones
        [(_HF, _SUFFIXES_410, _SUFFIXES_410.replace('" ZB", " YB")', '" ZB", " YB", " RB", " QB")')
          .replace('" ZiB", " YiB")', '" ZiB", " YiB", " RB", " QB")').replace('"KMGTPEZY"', '"KMGTPEZYRQ"'))],
    ],
    statement="naturalsize() stops at yottabytes.\n\n"
              "`humanize.naturalsize(10**28)` gives `'10000.0 YB'`. The SI prefixes ronna (R, 10^27) and quetta "
              "(Q, 10^30) were adopted in 2022: it should give `'10.0 RB'`, and likewise `RiB`/`QiB` with "
              "`binary=True` and `R`/`Q` with `gnu=True`.\n",
)

# ------------------------------------------------------------------------------------- pathspec

_PS_RETURN = """		include, _index = self._match_file(enumerate(self.patterns), norm_file)
		return include
"""

task(
    "pathspec_match_file_bool", "pathspec", "0.12.0", "0.12.1",
    ["re-export", "TestCase", "method", "one call site of several"], False,
    gold=[("pathspec/pathspec.py", _PS_RETURN, _PS_RETURN.replace("return include", "return bool(include)"))],
    tests=[("tests/test_03_pathspec.py", None, None)],
    # "matched" taken for "included": a file a negated pattern excludes now counts as a match
    wrong=[("pathspec/pathspec.py", _PS_RETURN, _PS_RETURN.replace("return include", "return include is not None"))],
    tried=[
        # the unmatched case fixed at its source: check_file() then reports False, not None, for a file no pattern matched
        [("pathspec/util.py", "\tout_include: Optional[bool] = None\n", "\tout_include: Optional[bool] = False\n")],
        # only the included case made a bool: an unmatched file still gives None
        [("pathspec/pathspec.py", _PS_RETURN, _PS_RETURN.replace("return include", "return True if include else include"))],
    ],
    statement="PathSpec.match_file() returns None since 0.12.0.\n\n"
              "`PathSpec.from_lines('gitwildmatch', ['*.txt', '!test/']).match_file('unmatch.bin')` returns `None`; "
              "it is documented to return a bool and returned `False` before 0.12.0. It should return `True` for "
              "an included file and `False` for an excluded or unmatched one.\n",
)

# ---------------------------------------------------------------- more-itertools: more sound tasks

_MI_DP_OLD = '''def distinct_permutations(iterable, r=None):
    """Yield successive distinct permutations of the elements in *iterable*.

        >>> sorted(distinct_permutations([1, 0, 1]))
        [(0, 1, 1), (1, 0, 1), (1, 1, 0)]

    Equivalent to ``set(permutations(iterable))``, except duplicates are not
    generated and thrown away. For larger input sequences this is much more
    efficient.

    Duplicate permutations arise when there are duplicated elements in the
    input iterable. The number of items returned is
    `n! / (x_1! * x_2! * ... * x_n!)`, where `n` is the total number of
    items input, and each `x_i` is the count of a distinct item in the input
    sequence.

    If *r* is given, only the *r*-length permutations are yielded.

        >>> sorted(distinct_permutations([1, 0, 1], r=2))
        [(0, 1), (1, 0), (1, 1)]
        >>> sorted(distinct_permutations(range(3), r=2))
        [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]

    """

    # Algorithm: https://w.wiki/Qai
    def _full(A):
        while True:
            # Yield the permutation we have
            yield tuple(A)

            # Find the largest index i such that A[i] < A[i + 1]
            for i in range(size - 2, -1, -1):
                if A[i] < A[i + 1]:
                    break
            #  If no such index exists, this permutation is the last one
            else:
                return

            # Find the largest index j greater than j such that A[i] < A[j]
            for j in range(size - 1, i, -1):
                if A[i] < A[j]:
                    break

            # Swap the value of A[i] with that of A[j], then reverse the
            # sequence from A[i + 1] to form the new permutation
            A[i], A[j] = A[j], A[i]
            A[i + 1 :] = A[: i - size : -1]  # A[i + 1:][::-1]

    # Algorithm: modified from the above
    def _partial(A, r):
        # Split A into the first r items and the last r items
        head, tail = A[:r], A[r:]
        right_head_indexes = range(r - 1, -1, -1)
        left_tail_indexes = range(len(tail))

        while True:
            # Yield the permutation we have
            yield tuple(head)

            # Starting from the right, find the first index of the head with
            # value smaller than the maximum value of the tail - call it i.
            pivot = tail[-1]
            for i in right_head_indexes:
                if head[i] < pivot:
                    break
                pivot = head[i]
            else:
                return

            # Starting from the left, find the first value of the tail
            # with a value greater than head[i] and swap.
            for j in left_tail_indexes:
                if tail[j] > head[i]:
                    head[i], tail[j] = tail[j], head[i]
                    break
            # If we didn't find one, start from the right and find the first
            # index of the head with a value greater than head[i] and swap.
            else:
                for j in right_head_indexes:
                    if head[j] > head[i]:
                        head[i], head[j] = head[j], head[i]
                        break

            # Reverse head[i + 1:] and swap it with tail[:r - (i + 1)]
            tail += head[: i - r : -1]  # head[i + 1:][::-1]
            i += 1
            head[i:], tail[:] = tail[: r - i], tail[r - i :]

    items = sorted(iterable)

    size = len(items)
    if r is None:
        r = size

    if 0 < r <= size:
        return _full(items) if (r == size) else _partial(items, r)

    return iter(() if r else ((),))


'''

_MI_DP_TESTS_OLD = '''class DistinctPermutationsTests(TestCase):
    def test_distinct_permutations(self):
        """Make sure the output for ``distinct_permutations()`` is the same as
        set(permutations(it)).

        """
        iterable = ['z', 'a', 'a', 'q', 'q', 'q', 'y']
        test_output = sorted(mi.distinct_permutations(iterable))
        ref_output = sorted(set(permutations(iterable)))
        self.assertEqual(test_output, ref_output)

    def test_other_iterables(self):
        """Make sure ``distinct_permutations()`` accepts a different type of
        iterables.

        """
        # a generator
        iterable = (c for c in ['z', 'a', 'a', 'q', 'q', 'q', 'y'])
        test_output = sorted(mi.distinct_permutations(iterable))
        # "reload" it
        iterable = (c for c in ['z', 'a', 'a', 'q', 'q', 'q', 'y'])
        ref_output = sorted(set(permutations(iterable)))
        self.assertEqual(test_output, ref_output)

        # an iterator
        iterable = iter(['z', 'a', 'a', 'q', 'q', 'q', 'y'])
        test_output = sorted(mi.distinct_permutations(iterable))
        # "reload" it
        iterable = iter(['z', 'a', 'a', 'q', 'q', 'q', 'y'])
        ref_output = sorted(set(permutations(iterable)))
        self.assertEqual(test_output, ref_output)

    def test_r(self):
        for iterable, r in (
            ('mississippi', 0),
            ('mississippi', 1),
            ('mississippi', 6),
            ('mississippi', 7),
            ('mississippi', 12),
            ([0, 1, 1, 0], 0),
            ([0, 1, 1, 0], 1),
            ([0, 1, 1, 0], 2),
            ([0, 1, 1, 0], 3),
            ([0, 1, 1, 0], 4),
            (['a'], 0),
            (['a'], 1),
            (['a'], 5),
            ([], 0),
            ([], 1),
            ([], 4),
        ):
            with self.subTest(iterable=iterable, r=r):
                expected = sorted(set(permutations(iterable, r)))
                actual = sorted(mi.distinct_permutations(iter(iterable), r))
                self.assertEqual(actual, expected)


'''

_MI_DP_NEW = '''def distinct_permutations(iterable, r=None):
    """Yield successive distinct permutations of the elements in *iterable*.

        >>> sorted(distinct_permutations([1, 0, 1]))
        [(0, 1, 1), (1, 0, 1), (1, 1, 0)]

    Equivalent to yielding from ``set(permutations(iterable))``, except
    duplicates are not generated and thrown away. For larger input sequences
    this is much more efficient.

    Duplicate permutations arise when there are duplicated elements in the
    input iterable. The number of items returned is
    `n! / (x_1! * x_2! * ... * x_n!)`, where `n` is the total number of
    items input, and each `x_i` is the count of a distinct item in the input
    sequence.

    If *r* is given, only the *r*-length permutations are yielded.

        >>> sorted(distinct_permutations([1, 0, 1], r=2))
        [(0, 1), (1, 0), (1, 1)]
        >>> sorted(distinct_permutations(range(3), r=2))
        [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]

    *iterable* need not be sortable, but note that using equal (``x == y``)
    but non-identical (``id(x) != id(y)``) elements may produce surprising
    behavior. For example, ``1`` and ``True`` are equal but non-identical:

        >>> list(distinct_permutations([1, True, '3']))  # doctest: +SKIP
        [
            (1, True, '3'),
            (1, '3', True),
            ('3', 1, True)
        ]
        >>> list(distinct_permutations([1, 2, '3']))  # doctest: +SKIP
        [
            (1, 2, '3'),
            (1, '3', 2),
            (2, 1, '3'),
            (2, '3', 1),
            ('3', 1, 2),
            ('3', 2, 1)
        ]
    """

    # Algorithm: https://w.wiki/Qai
    def _full(A):
        while True:
            # Yield the permutation we have
            yield tuple(A)

            # Find the largest index i such that A[i] < A[i + 1]
            for i in range(size - 2, -1, -1):
                if A[i] < A[i + 1]:
                    break
            #  If no such index exists, this permutation is the last one
            else:
                return

            # Find the largest index j greater than j such that A[i] < A[j]
            for j in range(size - 1, i, -1):
                if A[i] < A[j]:
                    break

            # Swap the value of A[i] with that of A[j], then reverse the
            # sequence from A[i + 1] to form the new permutation
            A[i], A[j] = A[j], A[i]
            A[i + 1 :] = A[: i - size : -1]  # A[i + 1:][::-1]

    # Algorithm: modified from the above
    def _partial(A, r):
        # Split A into the first r items and the last r items
        head, tail = A[:r], A[r:]
        right_head_indexes = range(r - 1, -1, -1)
        left_tail_indexes = range(len(tail))

        while True:
            # Yield the permutation we have
            yield tuple(head)

            # Starting from the right, find the first index of the head with
            # value smaller than the maximum value of the tail - call it i.
            pivot = tail[-1]
            for i in right_head_indexes:
                if head[i] < pivot:
                    break
                pivot = head[i]
            else:
                return

            # Starting from the left, find the first value of the tail
            # with a value greater than head[i] and swap.
            for j in left_tail_indexes:
                if tail[j] > head[i]:
                    head[i], tail[j] = tail[j], head[i]
                    break
            # If we didn't find one, start from the right and find the first
            # index of the head with a value greater than head[i] and swap.
            else:
                for j in right_head_indexes:
                    if head[j] > head[i]:
                        head[i], head[j] = head[j], head[i]
                        break

            # Reverse head[i + 1:] and swap it with tail[:r - (i + 1)]
            tail += head[: i - r : -1]  # head[i + 1:][::-1]
            i += 1
            head[i:], tail[:] = tail[: r - i], tail[r - i :]

    items = list(iterable)

    try:
        items.sort()
        sortable = True
    except TypeError:
        sortable = False

        indices_dict = defaultdict(list)

        for item in items:
            indices_dict[items.index(item)].append(item)

        indices = [items.index(item) for item in items]
        indices.sort()

        equivalent_items = {k: cycle(v) for k, v in indices_dict.items()}

        def permuted_items(permuted_indices):
            return tuple(
                next(equivalent_items[index]) for index in permuted_indices
            )

    size = len(items)
    if r is None:
        r = size

    # functools.partial(_partial, ... )
    algorithm = _full if (r == size) else partial(_partial, r=r)

    if 0 < r <= size:
        if sortable:
            return algorithm(items)
        else:
            return (
                permuted_items(permuted_indices)
                for permuted_indices in algorithm(indices)
            )

    return iter(() if r else ((),))


'''

_MI_DP_TESTS_NEW = '''class DistinctPermutationsTests(TestCase):
    def test_basic(self):
        iterable = ['z', 'a', 'a', 'q', 'q', 'q', 'y']
        actual = list(mi.distinct_permutations(iterable))
        expected = set(permutations(iterable))
        self.assertCountEqual(actual, expected)

    def test_r(self):
        for iterable, r in (
            ('mississippi', 0),
            ('mississippi', 1),
            ('mississippi', 6),
            ('mississippi', 7),
            ('mississippi', 12),
            ([0, 1, 1, 0], 0),
            ([0, 1, 1, 0], 1),
            ([0, 1, 1, 0], 2),
            ([0, 1, 1, 0], 3),
            ([0, 1, 1, 0], 4),
            (['a'], 0),
            (['a'], 1),
            (['a'], 5),
            ([], 0),
            ([], 1),
            ([], 4),
        ):
            with self.subTest(iterable=iterable, r=r):
                expected = set(permutations(iterable, r))
                actual = list(mi.distinct_permutations(iter(iterable), r))
                self.assertCountEqual(actual, expected)

    def test_unsortable(self):
        iterable = ['1', 2, 2, 3, 3, 3]
        actual = list(mi.distinct_permutations(iterable))
        expected = set(permutations(iterable))
        self.assertCountEqual(actual, expected)

    def test_unsortable_r(self):
        iterable = ['1', 2, 2, 3, 3, 3]
        for r in range(len(iterable) + 1):
            with self.subTest(iterable=iterable, r=r):
                actual = list(mi.distinct_permutations(iterable, r=r))
                expected = set(permutations(iterable, r=r))
                self.assertCountEqual(actual, expected)

    def test_unsorted_equivalent(self):
        iterable = [1, True, '3']
        actual = list(mi.distinct_permutations(iterable))
        expected = set(permutations(iterable))
        self.assertCountEqual(actual, expected)

    def test_unhashable(self):
        iterable = ([1], [1], 2)
        actual = list(mi.distinct_permutations(iterable))
        expected = list(mi.unique_everseen(permutations(iterable)))
        self.assertCountEqual(actual, expected)


'''

_MI_DP_SORTED = "    items = sorted(iterable)\n"

task(
    "more_itertools_distinct_permutations_unsortable", "more-itertools", "10.3.0", "10.4.0",
    ["re-export", "TestCase", "subTest-style loop", "one branch of several"], True,
    gold=[("more_itertools/more.py", _MI_DP_OLD, _MI_DP_NEW)],
    tests=[("tests/test_more.py", _MI_DP_TESTS_OLD, _MI_DP_TESTS_NEW)],
    # the release's fix without `indices.sort()` (found by floe's audit, audit-real-5cfeda72a3): the
    # algorithm needs its input sorted, and every unsortable input the tests use happens to list its
    # first-seen indices in order already; ([1], [1], 2, [1]) gives indices [0, 0, 2, 0], and the
    # unsorted run yields 3 of its 4 distinct permutations (written down as sound with the three
    # patches in `tried`, which fail; this one passes)
    wrong=[("more_itertools/more.py", _MI_DP_OLD, _MI_DP_NEW.replace("        indices.sort()\n", "", 1))],
    probe="from more_itertools import distinct_permutations\nfor items in ([[1], [1], 2, [1]], [1, '2', 1]):\n"
          "    got = list(distinct_permutations(items))\n    print(len(got), sorted(map(repr, got)))",
    tried=[
        # unsortable items deduplicated through a set: unhashable items (lists) raise TypeError
        [("more_itertools/more.py", _MI_DP_SORTED, '''    items = list(iterable)
    try:
        items.sort()
    except TypeError:
        from itertools import permutations

        return iter(set(permutations(items, r)))
''')],
        # equal items told apart by identity: two equal lists (or 1 and True) give repeated permutations
        [("more_itertools/more.py", _MI_DP_SORTED, '''    items = list(iterable)
    try:
        items.sort()
    except TypeError:
        first = {}
        indices = sorted(first.setdefault(id(x), i) for i, x in enumerate(items))
        by_index = {first[id(x)]: x for x in items}
        return (
            tuple(by_index[i] for i in p)
            for p in distinct_permutations(indices, r)
        )
''')],
        # sorted by type name, then value: the algorithm still compares the items themselves with <
        [("more_itertools/more.py", _MI_DP_SORTED, '''    items = sorted(iterable, key=lambda x: (type(x).__name__, x))
''')],
    ],
    statement="distinct_permutations() fails on items that cannot be sorted.\n\n"
              "`list(distinct_permutations(['1', 2, 2, 3, 3, 3]))` raises `TypeError: '<' not supported between "
              "instances of 'int' and 'str'`, and so do unhashable items of mixed types like `([1], [1], 2)`. "
              "It should accept any items, yielding each distinct permutation once (items are the same when they "
              "are equal), with or without *r*.\n",
)

_PS_GW = "pathspec/patterns/gitwildmatch.py"
_PS_REWRITE = """			if pattern_segs[-1] == '*' and len(pattern_segs) > 1:
				# A pattern ending with "/*" should match all descendant paths
				# of the directory, not just direct children. This is equivalent
				# to "{pattern}/**". This behavior of git contradicts its
				# documentation. So, set last segment to a double-asterisk to
				# include all descendants.
				pattern_segs[-1] = '**'

"""
_PS_STAR = """						output.append('[^/]+')
						need_slash = True
"""
_PS_STAR_END = """						output.append('[^/]+')

						if i == end:
							# A pattern ending without a slash ('/') will match a file
							# or a directory (with paths underneath it). E.g., "foo"
							# matches "foo", "foo/bar", "foo/bar/baz", etc.
							output.append('(?:(?P<ps_d>/).*)?')

						need_slash = True
"""

task(
    "pathspec_pure_wildcard", "pathspec", "0.10.0", "0.10.1",
    ["TestCase", "classmethod", "one branch of several"], True,
    gold=[(_PS_GW, "	) -> Tuple[Optional[AnyStr], Optional[bool]]:  # TODO: Change to NamedTuple\n",
           "	) -> Tuple[Optional[AnyStr], Optional[bool]]:\n"),
          (_PS_GW, _PS_REWRITE, ""),
          (_PS_GW, """						if need_slash:
							output.append('/')
""" + _PS_STAR, """						if need_slash:
							output.append('/')

""" + _PS_STAR_END)],
    tests=[("tests/test_gitignore.py", None, None), ("tests/test_gitwildmatch.py", None, None), ("tests/test_pathspec.py", None, None)],
    # every "*" segment made to match descendants, not only the last one: a pattern with "*" before
    # another segment ("a/*/b") then names the directory group twice and fails to compile; no test
    # has one (written down as sound with the two patches in `tried`, which fail; this one passes)
    wrong=[(_PS_GW, _PS_REWRITE, ""),
           (_PS_GW, _PS_STAR, """						output.append('[^/]+(?:(?P<ps_d>/).*)?')
						need_slash = True
""")],
    tried=[
        # the trailing "*" segment matches descendants, but "dir/*" is still rewritten to "dir/**"
        [(_PS_GW, _PS_STAR, _PS_STAR_END)],
        # the reported pattern special-cased (on the pattern's segments before they are normalized)
        [(_PS_GW, "			if pattern_segs[-1] == '*' and len(pattern_segs) > 1:",
          "			if pattern_segs == ['*']:\n				return '^(?:.+/)?[^/]+(?:(?P<ps_d>/).*)?$', include\n\n"
          "			if pattern_segs[-1] == '*' and len(pattern_segs) > 1:")],
    ],
    probe="from pathspec.patterns import GitWildMatchPattern\nfor p in ('a/*/b', 'a/*'):\n    try:\n        print(p, [bool(GitWildMatchPattern(p).match_file(f)) for f in ('a/x', 'a/x/b', 'a/x/y/b')])\n    except Exception as e:\n        print(p, type(e).__name__, e)",
    statement="Since 0.10.0 the pattern `*` does not match files in subdirectories.\n\n"
              "`PathSpec.from_lines('gitwildmatch', ['*', '!product_dir/']).match_files(['anydir/file.txt', "
              "'product_dir/file.txt'])` gives nothing for `anydir/file.txt`: `*` only matches paths of one "
              "segment now. As in git (and pathspec 0.9), `*` should match a file or directory at any depth and "
              "everything under it, and `'**/*'` should give the same regular expression as `'*'`.\n",
)

# ------------------------------------------------------------------------------------ termcolor

_TC = "src/termcolor/termcolor.py"
_TC_CONCEALED = """    "concealed": 8,
}
"""

task(
    "termcolor_strike", "termcolor", "2.4.0", "2.5.0",
    ["src layout", "re-export", "parametrize", "module constant"], False,
    gold=[(_TC, _TC_CONCEALED, """    "concealed": 8,
    "strike": 9,
}
"""),
          ("src/termcolor/_types.py", """    "concealed",
]""", """    "concealed",
    "strike",
]"""),
          ("src/termcolor/__main__.py", """    cprint("Concealed Magenta color", "magenta", attrs=["concealed"])
""", """    cprint("Concealed magenta color", "magenta", attrs=["concealed"])
    cprint("Strike red color", "red", attrs=["strike"])
""")],
    tests=[("tests/test_termcolor.py", """        ("concealed", "\\x1b[8mtext\\x1b[0m"),
""", """        ("concealed", "\\x1b[8mtext\\x1b[0m"),
        ("strike", "\\x1b[9mtext\\x1b[0m"),
""")],
    # the SGR code that turns crossing-out off (29), not the one that turns it on (9)
    wrong=[(_TC, _TC_CONCEALED, """    "concealed": 8,
    "strike": 29,
}
""")],
    tried=[
        # the attribute named after the effect ("strikethrough"), so attrs=["strike"] raises KeyError
        [(_TC, _TC_CONCEALED, """    "concealed": 8,
    "strikethrough": 9,
}
""")],
        # only the type (the Literal of attribute names) gets it; the table the codes come from does not
        [("src/termcolor/_types.py", """    "concealed",
]""", """    "concealed",
    "strike",
]""")],
    ],
    statement="Add a strike-through attribute.\n\n"
              "Terminals support crossed-out text (SGR code 9), but `colored(\"text\", attrs=[\"strike\"])` raises "
              "KeyError. Please add a `strike` attribute so that it gives `\"\\x1b[9mtext\\x1b[0m\"`.\n",
)

# -------------------------------------------------------------------------------------- boltons

_BI = "boltons/iterutils.py"
_BI_WINDOWED_OLD = '''def pairwise(src):
    """Convenience function for calling :func:`windowed` on *src*, with
    *size* set to 2.

    >>> pairwise(range(5))
    [(0, 1), (1, 2), (2, 3), (3, 4)]
    >>> pairwise([])
    []

    The number of pairs is always one less than the number of elements
    in the iterable passed in, except on empty inputs, which returns
    an empty list.
    """
    return windowed(src, 2)


def pairwise_iter(src):
    """Convenience function for calling :func:`windowed_iter` on *src*,
    with *size* set to 2.

    >>> list(pairwise_iter(range(5)))
    [(0, 1), (1, 2), (2, 3), (3, 4)]
    >>> list(pairwise_iter([]))
    []

    The number of pairs is always one less than the number of elements
    in the iterable passed in, or zero, when *src* is empty.

    """
    return windowed_iter(src, 2)


def windowed(src, size):
    """Returns tuples with exactly length *size*. If the iterable is
    too short to make a window of length *size*, no tuples are
    returned. See :func:`windowed_iter` for more.
    """
    return list(windowed_iter(src, size))


def windowed_iter(src, size):
    """Returns tuples with length *size* which represent a sliding
    window over iterable *src*.

    >>> list(windowed_iter(range(7), 3))
    [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 5), (4, 5, 6)]

    If the iterable is too short to make a window of length *size*,
    then no window tuples are returned.

    >>> list(windowed_iter(range(3), 5))
    []
    """
    # TODO: lists? (for consistency)
    tees = itertools.tee(src, size)
    try:
        for i, t in enumerate(tees):
            for _ in xrange(i):
                next(t)
    except StopIteration:
        return izip([])
    return izip(*tees)


'''

_BI_WINDOWED_NEW = '''def pairwise(src, end=_UNSET):
    """Convenience function for calling :func:`windowed` on *src*, with
    *size* set to 2.

    >>> pairwise(range(5))
    [(0, 1), (1, 2), (2, 3), (3, 4)]
    >>> pairwise([])
    []

    Unless *end* is set, the number of pairs is always one less than 
    the number of elements in the iterable passed in, except on an empty input, 
    which will return an empty list.

    With *end* set, a number of pairs equal to the length of *src* is returned,
    with the last item of the last pair being equal to *end*.

    >>> list(pairwise(range(3), end=None))
    [(0, 1), (1, 2), (2, None)]

    This way, *end* values can be useful as sentinels to signal the end of the iterable.
    """
    return windowed(src, 2, fill=end)


def pairwise_iter(src, end=_UNSET):
    """Convenience function for calling :func:`windowed_iter` on *src*,
    with *size* set to 2.

    >>> list(pairwise_iter(range(5)))
    [(0, 1), (1, 2), (2, 3), (3, 4)]
    >>> list(pairwise_iter([]))
    []

    Unless *end* is set, the number of pairs is always one less 
    than the number of elements in the iterable passed in, 
    or zero, when *src* is empty.

    With *end* set, a number of pairs equal to the length of *src* is returned,
    with the last item of the last pair being equal to *end*. 

    >>> list(pairwise_iter(range(3), end=None))
    [(0, 1), (1, 2), (2, None)]    

    This way, *end* values can be useful as sentinels to signal the end
    of the iterable. For infinite iterators, setting *end* has no effect.
    """
    return windowed_iter(src, 2, fill=end)


def windowed(src, size, fill=_UNSET):
    """Returns tuples with exactly length *size*. If *fill* is unset 
    and the iterable is too short to make a window of length *size*, 
    no tuples are returned. See :func:`windowed_iter` for more.
    """
    return list(windowed_iter(src, size, fill=fill))


def windowed_iter(src, size, fill=_UNSET):
    """Returns tuples with length *size* which represent a sliding
    window over iterable *src*.

    >>> list(windowed_iter(range(7), 3))
    [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 5), (4, 5, 6)]

    If *fill* is unset, and the iterable is too short to make a window 
    of length *size*, then no window tuples are returned.

    >>> list(windowed_iter(range(3), 5))
    []

    With *fill* set, the iterator always yields a number of windows
    equal to the length of the *src* iterable.
    
    >>> windowed(range(4), 3, fill=None)
    [(0, 1, 2), (1, 2, 3), (2, 3, None), (3, None, None)]

    This way, *fill* values can be useful to signal the end of the iterable.
    For infinite iterators, setting *fill* has no effect.
    """
    tees = itertools.tee(src, size)
    if fill is _UNSET:
        try:
            for i, t in enumerate(tees):
                for _ in range(i):
                    next(t)
        except StopIteration:
            return zip([])
        return zip(*tees)
    
    for i, t in enumerate(tees):
        for _ in range(i):  
            try:
                next(t)
            except StopIteration:
                continue
    return zip_longest(*tees, fillvalue=fill)



'''

_BI_PAIRWISE = """    return windowed(src, 2)
"""
_BI_PAIRWISE_ITER = """    return windowed_iter(src, 2)
"""
_BI_WINDOWED = """def windowed(src, size):
    \"\"\"Returns tuples with exactly length *size*. If the iterable is
    too short to make a window of length *size*, no tuples are
    returned. See :func:`windowed_iter` for more.
    \"\"\"
    return list(windowed_iter(src, size))
"""
_BI_TEES = """    # TODO: lists? (for consistency)
    tees = itertools.tee(src, size)
"""


def _boltons_fill(marker="_UNSET", pad=None, pairwise=True):
    """A wrong patch for the fill/end parameters: `marker` is the default that means "no fill";
    `pad` pads the source with that many fills (instead of zip_longest over the tees);
    `pairwise` False leaves pairwise() and pairwise_iter() without *end*."""
    edits = [
        (_BI, "def windowed(src, size):", f"def windowed(src, size, fill={marker}):"),
        (_BI, "    return list(windowed_iter(src, size))\n", "    return list(windowed_iter(src, size, fill=fill))\n"),
        (_BI, "def windowed_iter(src, size):", f"def windowed_iter(src, size, fill={marker}):"),
    ]
    if pad is None:
        body = f"""    if fill is not {marker}:
        tees = itertools.tee(src, size)
        for i, t in enumerate(tees):
            for _ in range(i):
                next(t, None)
        return itertools.zip_longest(*tees, fillvalue=fill)
"""
    else:
        body = f"""    if fill is not {marker}:
        src = itertools.chain(src, itertools.repeat(fill, {pad}))
"""
    edits.append((_BI, _BI_TEES, body + _BI_TEES))
    if pairwise:
        edits += [(_BI, "def pairwise(src):", f"def pairwise(src, end={marker}):"),
                  (_BI, _BI_PAIRWISE, "    return windowed(src, 2, fill=end)\n"),
                  (_BI, "def pairwise_iter(src):", f"def pairwise_iter(src, end={marker}):"),
                  (_BI, _BI_PAIRWISE_ITER, "    return windowed_iter(src, 2, fill=end)\n")]
    return edits


task(
    "boltons_windowed_fill", "boltons", "23.0.0", "23.1.0",
    ["keyword argument", "sentinel default", "one call site of several", "test file taken whole"], True,
    gold=[(_BI, """    from itertools import izip
    _IS_PY3 = False""", """    from itertools import izip, izip_longest as zip_longest
    _IS_PY3 = False"""),
          (_BI, """    izip, xrange = zip, range
""", """    izip, xrange = zip, range
    from itertools import zip_longest
"""),
          (_BI, _BI_WINDOWED_OLD, _BI_WINDOWED_NEW)],
    # the release's sdist is the first with tests/: its test file is taken whole
    tests=[("tests/test_iterutils.py", None, None)],
    # written down as sound; floe's audit (audit-real-d4b2dc5089) found that the fix without the
    # fill value passed on to zip_longest passes every test: the tests only ever pass fill=None,
    # which is zip_longest's own default, so any other fill comes out as None
    wrong=[(_BI, """    from itertools import izip
    _IS_PY3 = False""", """    from itertools import izip, izip_longest as zip_longest
    _IS_PY3 = False"""),
           (_BI, """    izip, xrange = zip, range
""", """    izip, xrange = zip, range
    from itertools import zip_longest
"""),
           (_BI, _BI_WINDOWED_OLD, _BI_WINDOWED_NEW.replace("zip_longest(*tees, fillvalue=fill)", "zip_longest(*tees)"))],
    probe="from boltons.iterutils import windowed\nprint(windowed(range(4), 3, fill=0))",
    tried=[
        # None taken to mean "no fill", so fill=None / end=None (what the examples pass) do nothing
        _boltons_fill(marker="None"),
        # the source padded with one fill per window slot: one window of fills too many
        _boltons_fill(pad="size"),
        # windowed() and windowed_iter() take fill; pairwise() and pairwise_iter() get no end
        _boltons_fill(pairwise=False),
    ],
    statement="windowed() and pairwise() drop the last items.\n\n"
              "`iterutils.windowed(range(4), 3)` gives `[(0, 1, 2), (1, 2, 3)]`, and `pairwise` never pairs the last "
              "item, so code that needs to see every element with its successors has to pad the input itself. "
              "Please add a *fill* argument to `windowed`/`windowed_iter` and an *end* argument to "
              "`pairwise`/`pairwise_iter`: when given (any value, None included), as many windows as items are "
              "yielded, padded with it: `windowed(range(4), 3, fill=None)` gives `[(0, 1, 2), (1, 2, 3), "
              "(2, 3, None), (3, None, None)]` and `pairwise(range(3), end=None)` gives `[(0, 1), (1, 2), (2, None)]`.\n",
)

# termcolor 2.2.0's tables, taken from the two sdists (repr: they hold escape sequences)

_TC_220_OLD = 'ATTRIBUTES = dict(\n    list(\n        zip(\n            [\n                "bold",\n                "dark",\n                "",\n                "underline",\n                "blink",\n                "",\n                "reverse",\n                "concealed",\n            ],\n            list(range(1, 9)),\n        )\n    )\n)\ndel ATTRIBUTES[""]\n\n\nHIGHLIGHTS = dict(\n    list(\n        zip(\n            [\n                "on_grey",\n                "on_red",\n                "on_green",\n                "on_yellow",\n                "on_blue",\n                "on_magenta",\n                "on_cyan",\n                "on_white",\n            ],\n            list(range(40, 48)),\n        )\n    )\n)\n\n\nCOLORS = dict(\n    list(\n        zip(\n            [\n                "grey",\n                "red",\n                "green",\n                "yellow",\n                "blue",\n                "magenta",\n                "cyan",\n                "white",\n            ],\n            list(range(30, 38)),\n        )\n    )\n)\n\n\nRESET = "\\033[0m"\n\n\ndef _can_do_colour() -> bool:\n    """Check env vars and for tty/dumb terminal"""\n    if "ANSI_COLORS_DISABLED" in os.environ:\n        return False\n    if "NO_COLOR" in os.environ:\n        return False\n    if "FORCE_COLOR" in os.environ:\n        return True\n    return (\n        hasattr(sys.stdout, "isatty")\n        and sys.stdout.isatty()\n        and os.environ.get("TERM") != "dumb"\n    )\n\n\ndef colored(\n    text: str,\n    color: str | None = None,\n    on_color: str | None = None,\n    attrs: Iterable[str] | None = None,\n) -> str:\n    """Colorize text.\n\n    Available text colors:\n        grey, red, green, yellow, blue, magenta, cyan, white.\n\n    Available text highlights:\n        on_grey, on_red, on_green, on_yellow, on_blue, on_magenta, on_cyan, on_white.\n\n    Available attributes:\n        bold, dark, underline, blink, reverse, concealed.\n\n    Example:\n        colored(\'Hello, World!\', \'red\', \'on_grey\', [\'bold\', \'blink\'])\n        colored(\'Hello, World!\', \'green\')\n    """\n    if not _can_do_colour():\n        return text\n\n    fmt_str = "\\033[%dm%s"\n    if color is not None:\n        text = fmt_str % (COLORS[color], text)\n\n    if on_color is not None:\n        text = fmt_str % (HIGHLIGHTS[on_color], text)\n\n    if attrs is not None:\n        for attr in attrs:\n            text = fmt_str % (ATTRIBUTES[attr], text)\n\n    return text + RESET\n\n\n'
_TC_220_NEW = 'ATTRIBUTES = {\n    "bold": 1,\n    "dark": 2,\n    "underline": 4,\n    "blink": 5,\n    "reverse": 7,\n    "concealed": 8,\n}\n\n\nHIGHLIGHTS = {\n    "on_black": 40,\n    "on_grey": 40,  # Actually black but kept for backwards compatibility\n    "on_red": 41,\n    "on_green": 42,\n    "on_yellow": 43,\n    "on_blue": 44,\n    "on_magenta": 45,\n    "on_cyan": 46,\n    "on_light_grey": 47,\n    "on_dark_grey": 100,\n    "on_light_red": 101,\n    "on_light_green": 102,\n    "on_light_yellow": 103,\n    "on_light_blue": 104,\n    "on_light_magenta": 105,\n    "on_light_cyan": 106,\n    "on_white": 107,\n}\n\nCOLORS = {\n    "black": 30,\n    "grey": 30,  # Actually black but kept for backwards compatibility\n    "red": 31,\n    "green": 32,\n    "yellow": 33,\n    "blue": 34,\n    "magenta": 35,\n    "cyan": 36,\n    "light_grey": 37,\n    "dark_grey": 90,\n    "light_red": 91,\n    "light_green": 92,\n    "light_yellow": 93,\n    "light_blue": 94,\n    "light_magenta": 95,\n    "light_cyan": 96,\n    "white": 97,\n}\n\n\nRESET = "\\033[0m"\n\n\ndef _can_do_colour() -> bool:\n    """Check env vars and for tty/dumb terminal"""\n    if "ANSI_COLORS_DISABLED" in os.environ:\n        return False\n    if "NO_COLOR" in os.environ:\n        return False\n    if "FORCE_COLOR" in os.environ:\n        return True\n    return (\n        hasattr(sys.stdout, "isatty")\n        and sys.stdout.isatty()\n        and os.environ.get("TERM") != "dumb"\n    )\n\n\ndef colored(\n    text: str,\n    color: str | None = None,\n    on_color: str | None = None,\n    attrs: Iterable[str] | None = None,\n) -> str:\n    """Colorize text.\n\n    Available text colors:\n        black, red, green, yellow, blue, magenta, cyan, white,\n        light_grey, dark_grey, light_red, light_green, light_yellow, light_blue,\n        light_magenta, light_cyan.\n\n    Available text highlights:\n        on_black, on_red, on_green, on_yellow, on_blue, on_magenta, on_cyan, on_white,\n        on_light_grey, on_dark_grey, on_light_red, on_light_green, on_light_yellow,\n        on_light_blue, on_light_magenta, on_light_cyan.\n\n    Available attributes:\n        bold, dark, underline, blink, reverse, concealed.\n\n    Example:\n        colored(\'Hello, World!\', \'red\', \'on_black\', [\'bold\', \'blink\'])\n        colored(\'Hello, World!\', \'green\')\n    """\n    if not _can_do_colour():\n        return text\n\n    fmt_str = "\\033[%dm%s"\n    if color is not None:\n        text = fmt_str % (COLORS[color], text)\n\n    if on_color is not None:\n        text = fmt_str % (HIGHLIGHTS[on_color], text)\n\n    if attrs is not None:\n        for attr in attrs:\n            text = fmt_str % (ATTRIBUTES[attr], text)\n\n    return text + RESET\n\n\n'
_TC_220_MAIN_OLD = 'from __future__ import annotations\n\nimport os\n\nfrom termcolor import cprint\n\nif __name__ == "__main__":\n    print(f"Current terminal type: {os.getenv(\'TERM\')}")\n    print("Test basic colors:")\n    cprint("Grey color", "grey")\n    cprint("Red color", "red")\n    cprint("Green color", "green")\n    cprint("Yellow color", "yellow")\n    cprint("Blue color", "blue")\n    cprint("Magenta color", "magenta")\n    cprint("Cyan color", "cyan")\n    cprint("White color", "white")\n    print("-" * 78)\n\n    print("Test highlights:")\n    cprint("On grey color", on_color="on_grey")\n    cprint("On red color", on_color="on_red")\n    cprint("On green color", on_color="on_green")\n    cprint("On yellow color", on_color="on_yellow")\n    cprint("On blue color", on_color="on_blue")\n    cprint("On magenta color", on_color="on_magenta")\n    cprint("On cyan color", on_color="on_cyan")\n    cprint("On white color", color="grey", on_color="on_white")\n    print("-" * 78)\n\n    print("Test attributes:")\n    cprint("Bold grey color", "grey", attrs=["bold"])\n    cprint("Dark red color", "red", attrs=["dark"])\n    cprint("Underline green color", "green", attrs=["underline"])\n    cprint("Blink yellow color", "yellow", attrs=["blink"])\n    cprint("Reversed blue color", "blue", attrs=["reverse"])\n    cprint("Concealed Magenta color", "magenta", attrs=["concealed"])\n    cprint(\n        "Bold underline reverse cyan color",\n        "cyan",\n        attrs=["bold", "underline", "reverse"],\n    )\n    cprint(\n        "Dark blink concealed white color",\n        "white",\n        attrs=["dark", "blink", "concealed"],\n    )\n    print("-" * 78)\n\n    print("Test mixing:")\n    cprint("Underline red on grey color", "red", "on_grey", ["underline"])\n    cprint("Reversed green on red color", "green", "on_red", ["reverse"])\n'
_TC_220_MAIN_NEW = 'from __future__ import annotations\n\nimport os\n\nfrom termcolor import cprint\n\nif __name__ == "__main__":\n    print(f"Current terminal type: {os.getenv(\'TERM\')}")\n    print("Test basic colors:")\n    cprint("Black color", "black")\n    cprint("Red color", "red")\n    cprint("Green color", "green")\n    cprint("Yellow color", "yellow")\n    cprint("Blue color", "blue")\n    cprint("Magenta color", "magenta")\n    cprint("Cyan color", "cyan")\n    cprint("White color", "white")\n    cprint("Light grey color", "light_grey")\n    cprint("Dark grey color", "dark_grey")\n    cprint("Light red color", "light_red")\n    cprint("Light green color", "light_green")\n    cprint("Light yellow color", "light_yellow")\n    cprint("Light blue color", "light_blue")\n    cprint("Light magenta color", "light_magenta")\n    cprint("Light cyan color", "light_cyan")\n    print("-" * 78)\n\n    print("Test highlights:")\n    cprint("On black color", on_color="on_black")\n    cprint("On red color", on_color="on_red")\n    cprint("On green color", on_color="on_green")\n    cprint("On yellow color", on_color="on_yellow")\n    cprint("On blue color", on_color="on_blue")\n    cprint("On magenta color", on_color="on_magenta")\n    cprint("On cyan color", on_color="on_cyan")\n    cprint("On white color", color="black", on_color="on_white")\n    cprint("On light grey color", on_color="on_light_grey")\n    cprint("On dark grey color", on_color="on_dark_grey")\n    cprint("On light red color", on_color="on_light_red")\n    cprint("On light green color", on_color="on_light_green")\n    cprint("On light yellow color", on_color="on_light_yellow")\n    cprint("On light blue color", on_color="on_light_blue")\n    cprint("On light magenta color", on_color="on_light_magenta")\n    cprint("On light cyan color", on_color="on_light_cyan")\n    print("-" * 78)\n\n    print("Test attributes:")\n    cprint("Bold black color", "black", attrs=["bold"])\n    cprint("Dark red color", "red", attrs=["dark"])\n    cprint("Underline green color", "green", attrs=["underline"])\n    cprint("Blink yellow color", "yellow", attrs=["blink"])\n    cprint("Reversed blue color", "blue", attrs=["reverse"])\n    cprint("Concealed Magenta color", "magenta", attrs=["concealed"])\n    cprint(\n        "Bold underline reverse cyan color",\n        "cyan",\n        attrs=["bold", "underline", "reverse"],\n    )\n    cprint(\n        "Dark blink concealed white color",\n        "white",\n        attrs=["dark", "blink", "concealed"],\n    )\n    print("-" * 78)\n\n    print("Test mixing:")\n    cprint("Underline red on black color", "red", "on_black", ["underline"])\n    cprint("Reversed green on red color", "green", "on_red", ["reverse"])\n'
_TC_220_TABLES_OLD = 'ATTRIBUTES = dict(\n    list(\n        zip(\n            [\n                "bold",\n                "dark",\n                "",\n                "underline",\n                "blink",\n                "",\n                "reverse",\n                "concealed",\n            ],\n            list(range(1, 9)),\n        )\n    )\n)\ndel ATTRIBUTES[""]\n\n\nHIGHLIGHTS = dict(\n    list(\n        zip(\n            [\n                "on_grey",\n                "on_red",\n                "on_green",\n                "on_yellow",\n                "on_blue",\n                "on_magenta",\n                "on_cyan",\n                "on_white",\n            ],\n            list(range(40, 48)),\n        )\n    )\n)\n\n\nCOLORS = dict(\n    list(\n        zip(\n            [\n                "grey",\n                "red",\n                "green",\n                "yellow",\n                "blue",\n                "magenta",\n                "cyan",\n                "white",\n            ],\n            list(range(30, 38)),\n        )\n    )\n)\n\n\n'
_TC_220_TABLES_NEW = 'ATTRIBUTES = {\n    "bold": 1,\n    "dark": 2,\n    "underline": 4,\n    "blink": 5,\n    "reverse": 7,\n    "concealed": 8,\n}\n\n\nHIGHLIGHTS = {\n    "on_black": 40,\n    "on_grey": 40,  # Actually black but kept for backwards compatibility\n    "on_red": 41,\n    "on_green": 42,\n    "on_yellow": 43,\n    "on_blue": 44,\n    "on_magenta": 45,\n    "on_cyan": 46,\n    "on_light_grey": 47,\n    "on_dark_grey": 100,\n    "on_light_red": 101,\n    "on_light_green": 102,\n    "on_light_yellow": 103,\n    "on_light_blue": 104,\n    "on_light_magenta": 105,\n    "on_light_cyan": 106,\n    "on_white": 107,\n}\n\nCOLORS = {\n    "black": 30,\n    "grey": 30,  # Actually black but kept for backwards compatibility\n    "red": 31,\n    "green": 32,\n    "yellow": 33,\n    "blue": 34,\n    "magenta": 35,\n    "cyan": 36,\n    "light_grey": 37,\n    "dark_grey": 90,\n    "light_red": 91,\n    "light_green": 92,\n    "light_yellow": 93,\n    "light_blue": 94,\n    "light_magenta": 95,\n    "light_cyan": 96,\n    "white": 97,\n}\n\n\n'
_TC_220_COLORS_OLD = 'COLORS = dict(\n    list(\n        zip(\n            [\n                "grey",\n                "red",\n                "green",\n                "yellow",\n                "blue",\n                "magenta",\n                "cyan",\n                "white",\n            ],\n            list(range(30, 38)),\n        )\n    )\n)\n\n\n'
_TC_220_COLORS_NEW = 'COLORS = {\n    "black": 30,\n    "grey": 30,  # Actually black but kept for backwards compatibility\n    "red": 31,\n    "green": 32,\n    "yellow": 33,\n    "blue": 34,\n    "magenta": 35,\n    "cyan": 36,\n    "light_grey": 37,\n    "dark_grey": 90,\n    "light_red": 91,\n    "light_green": 92,\n    "light_yellow": 93,\n    "light_blue": 94,\n    "light_magenta": 95,\n    "light_cyan": 96,\n    "white": 97,\n}\n\n\n'


task(
    "termcolor_bright_colors", "termcolor", "2.1.1", "2.2.0",
    ["src layout", "re-export", "parametrize", "module constant"], True,
    gold=[(_TC, _TC_220_OLD, _TC_220_NEW),
          ("src/termcolor/__main__.py", _TC_220_MAIN_OLD, _TC_220_MAIN_NEW)],
    tests=[("tests/test_termcolor.py", None, None)],
    # light magenta and light cyan given each other's codes: the tests sample five of the seventeen
    # colours (black, dark_grey, light_blue, light_grey, white) and their highlights, so a slip in
    # an unsampled one passes (written down as sound with the patches in `tried`, which fail)
    wrong=[(_TC, _TC_220_TABLES_OLD, _TC_220_TABLES_NEW.replace('"light_magenta": 95', '"light_magenta": 96')
            .replace('"light_cyan": 96', '"light_cyan": 95').replace('"on_light_magenta": 105', '"on_light_magenta": 106')
            .replace('"on_light_cyan": 106', '"on_light_cyan": 105'))],
    probe="import os\nos.environ['FORCE_COLOR'] = '1'\nfrom termcolor import colored\nfor c in ('light_magenta', 'light_cyan'):\n    print(c, repr(colored('x', c)), repr(colored('x', on_color='on_' + c)))",
    tried=[
        # the bright colours added under light_*, but white and on_white left at the dim codes 37/47
        [(_TC, _TC_220_TABLES_OLD, _TC_220_TABLES_NEW.replace('"white": 97', '"white": 37')
          .replace('"on_white": 107', '"on_white": 47'))],
        # the foreground table only: no on_light_* highlights
        [(_TC, _TC_220_COLORS_OLD, _TC_220_COLORS_NEW)],
        # grey renamed to black (it is black), the old names dropped
        [(_TC, _TC_220_TABLES_OLD, _TC_220_TABLES_NEW.replace(
            '    "grey": 30,  # Actually black but kept for backwards compatibility\n', '').replace(
            '    "on_grey": 40,  # Actually black but kept for backwards compatibility\n', ''))],
    ],
    statement="Support the bright (90-97, 100-107) colours.\n\n"
              "termcolor only knows the eight basic colours, and calls black `grey`. Please add `black`, "
              "`light_grey` (37), `dark_grey` (90), `light_red`, `light_green`, `light_yellow`, `light_blue`, "
              "`light_magenta`, `light_cyan` (91-96) and make `white` the bright white (97), with the matching "
              "`on_*` highlights (40-47, 100-107; `on_white` is 107); keep `grey`/`on_grey` working as aliases of black.\n",
)

# more-itertools 10.6.0's is_sorted() and its tests, taken from the two sdists

_MI_IS_SORTED_OLD = 'def is_sorted(iterable, key=None, reverse=False, strict=False):\n    """Returns ``True`` if the items of iterable are in sorted order, and\n    ``False`` otherwise. *key* and *reverse* have the same meaning that they do\n    in the built-in :func:`sorted` function.\n\n    >>> is_sorted([\'1\', \'2\', \'3\', \'4\', \'5\'], key=int)\n    True\n    >>> is_sorted([5, 4, 3, 1, 2], reverse=True)\n    False\n\n    If *strict*, tests for strict sorting, that is, returns ``False`` if equal\n    elements are found:\n\n    >>> is_sorted([1, 2, 2])\n    True\n    >>> is_sorted([1, 2, 2], strict=True)\n    False\n\n    The function returns ``False`` after encountering the first out-of-order\n    item, which means it may produce results that differ from the built-in\n    :func:`sorted` function for objects with unusual comparison dynamics.\n    If there are no out-of-order items, the iterable is exhausted.\n    """\n    compare = le if strict else lt\n    it = iterable if (key is None) else map(key, iterable)\n    it_1, it_2 = tee(it)\n    next(it_2 if reverse else it_1, None)\n\n    return not any(map(compare, it_1, it_2))\n\n\n'
_MI_IS_SORTED_NEW = 'def is_sorted(iterable, key=None, reverse=False, strict=False):\n    """Returns ``True`` if the items of iterable are in sorted order, and\n    ``False`` otherwise. *key* and *reverse* have the same meaning that they do\n    in the built-in :func:`sorted` function.\n\n    >>> is_sorted([\'1\', \'2\', \'3\', \'4\', \'5\'], key=int)\n    True\n    >>> is_sorted([5, 4, 3, 1, 2], reverse=True)\n    False\n\n    If *strict*, tests for strict sorting, that is, returns ``False`` if equal\n    elements are found:\n\n    >>> is_sorted([1, 2, 2])\n    True\n    >>> is_sorted([1, 2, 2], strict=True)\n    False\n\n    The function returns ``False`` after encountering the first out-of-order\n    item, which means it may produce results that differ from the built-in\n    :func:`sorted` function for objects with unusual comparison dynamics\n    (like ``math.nan``). If there are no out-of-order items, the iterable is\n    exhausted.\n    """\n    it = iterable if (key is None) else map(key, iterable)\n    a, b = tee(it)\n    next(b, None)\n    if reverse:\n        b, a = a, b\n    return all(map(lt, a, b)) if strict else not any(map(lt, b, a))\n\n\n'
_MI_IS_SORTED_TESTS_OLD = "class IsSortedTests(TestCase):\n    def test_basic(self):\n        for iterable, kwargs, expected in [\n            ([], {}, True),\n            ([1], {}, True),\n            ([1, 2, 3], {}, True),\n            ([1, 1, 2, 3], {}, True),\n            ([1, 10, 2, 3], {}, False),\n            ([3, float('nan'), 1, 2], {}, True),\n            (['1', '10', '2', '3'], {}, True),\n            (['1', '10', '2', '3'], {'key': int}, False),\n            ([1, 2, 3], {'reverse': True}, False),\n            ([1, 1, 2, 3], {'reverse': True}, False),\n            ([1, 10, 2, 3], {'reverse': True}, False),\n            (['3', '2', '10', '1'], {'reverse': True}, True),\n            (['3', '2', '10', '1'], {'key': int, 'reverse': True}, False),\n            # strict\n            ([], {'strict': True}, True),\n            ([1], {'strict': True}, True),\n            ([1, 1], {'strict': True}, False),\n            ([1, 2, 3], {'strict': True}, True),\n            ([1, 1, 2, 3], {'strict': True}, False),\n            ([1, 10, 2, 3], {'strict': True}, False),\n            (['1', '10', '2', '3'], {'strict': True}, True),\n            (['1', '10', '2', '3', '3'], {'strict': True}, False),\n            (['1', '10', '2', '3'], {'strict': True, 'key': int}, False),\n            ([1, 2, 3], {'strict': True, 'reverse': True}, False),\n            ([1, 1, 2, 3], {'strict': True, 'reverse': True}, False),\n            ([1, 10, 2, 3], {'strict': True, 'reverse': True}, False),\n            (['3', '2', '10', '1'], {'strict': True, 'reverse': True}, True),\n            (\n                ['3', '2', '10', '10', '1'],\n                {'strict': True, 'reverse': True},\n                False,\n            ),\n            (\n                ['3', '2', '10', '1'],\n                {'strict': True, 'key': int, 'reverse': True},\n                False,\n            ),\n            # We'll do the same weird thing as Python here\n            (['nan', 0, 'nan', 0], {'key': float}, True),\n            ([0, 'nan', 0, 'nan'], {'key': float}, True),\n            (['nan', 0, 'nan', 0], {'key': float, 'reverse': True}, True),\n            ([0, 'nan', 0, 'nan'], {'key': float, 'reverse': True}, True),\n            ([0, 'nan', 0, 'nan'], {'strict': True, 'key': float}, True),\n            (\n                ['nan', 0, 'nan', 0],\n                {'strict': True, 'key': float, 'reverse': True},\n                True,\n            ),\n        ]:\n            key = kwargs.get('key', None)\n            reverse = kwargs.get('reverse', False)\n            strict = kwargs.get('strict', False)\n\n            with self.subTest(\n                iterable=iterable, key=key, reverse=reverse, strict=strict\n            ):\n                mi_result = mi.is_sorted(\n                    iter(iterable), key=key, reverse=reverse, strict=strict\n                )\n\n                sorted_iterable = sorted(iterable, key=key, reverse=reverse)\n                if strict:\n                    sorted_iterable = list(mi.unique_justseen(sorted_iterable))\n\n                py_result = iterable == sorted_iterable\n\n                self.assertEqual(mi_result, expected)\n                self.assertEqual(mi_result, py_result)\n\n\n"
_MI_IS_SORTED_TESTS_NEW = "class BarelySortable:\n    def __init__(self, value):\n        self.value = value\n\n    def __lt__(self, other):\n        return self.value < other.value\n\n    def __int__(self):\n        return int(self.value)\n\n\nclass IsSortedTests(TestCase):\n    def test_basic(self):\n        for iterable, kwargs, expected in [\n            ([], {}, True),\n            ([1], {}, True),\n            ([1, 2, 3], {}, True),\n            ([1, 1, 2, 3], {}, True),\n            ([1, 10, 2, 3], {}, False),\n            (['1', '10', '2', '3'], {}, True),\n            (['1', '10', '2', '3'], {'key': int}, False),\n            ([1, 2, 3], {'reverse': True}, False),\n            ([1, 1, 2, 3], {'reverse': True}, False),\n            ([1, 10, 2, 3], {'reverse': True}, False),\n            (['3', '2', '10', '1'], {'reverse': True}, True),\n            (['3', '2', '10', '1'], {'key': int, 'reverse': True}, False),\n            # strict\n            ([], {'strict': True}, True),\n            ([1], {'strict': True}, True),\n            ([1, 1], {'strict': True}, False),\n            ([1, 2, 3], {'strict': True}, True),\n            ([1, 1, 2, 3], {'strict': True}, False),\n            ([1, 10, 2, 3], {'strict': True}, False),\n            (['1', '10', '2', '3'], {'strict': True}, True),\n            (['1', '10', '2', '3', '3'], {'strict': True}, False),\n            (['1', '10', '2', '3'], {'strict': True, 'key': int}, False),\n            ([1, 2, 3], {'strict': True, 'reverse': True}, False),\n            ([1, 1, 2, 3], {'strict': True, 'reverse': True}, False),\n            ([1, 10, 2, 3], {'strict': True, 'reverse': True}, False),\n            (['3', '2', '10', '1'], {'strict': True, 'reverse': True}, True),\n            (\n                ['3', '2', '10', '10', '1'],\n                {'strict': True, 'reverse': True},\n                False,\n            ),\n            (\n                ['3', '2', '10', '1'],\n                {'strict': True, 'key': int, 'reverse': True},\n                False,\n            ),\n        ]:\n            key = kwargs.get('key', None)\n            reverse = kwargs.get('reverse', False)\n            strict = kwargs.get('strict', False)\n\n            with self.subTest(\n                iterable=iterable, key=key, reverse=reverse, strict=strict\n            ):\n                mi_result = mi.is_sorted(\n                    map(BarelySortable, iterable),\n                    key=key,\n                    reverse=reverse,\n                    strict=strict,\n                )\n\n                sorted_iterable = sorted(iterable, key=key, reverse=reverse)\n                if strict:\n                    sorted_iterable = list(mi.unique_justseen(sorted_iterable))\n\n                py_result = iterable == sorted_iterable\n\n                self.assertEqual(mi_result, expected)\n                self.assertEqual(mi_result, py_result)\n\n\n"

_MI_IS_SORTED_COMPARE = "    compare = le if strict else lt\n"

task(
    "more_itertools_is_sorted_lt", "more-itertools", "10.5.0", "10.6.0",
    ["re-export", "TestCase", "subTest-style loop", "keyword argument"], False,
    gold=[("more_itertools/more.py", _MI_IS_SORTED_OLD, _MI_IS_SORTED_NEW)],
    tests=[("tests/test_more.py", _MI_IS_SORTED_TESTS_OLD, _MI_IS_SORTED_TESTS_NEW)],
    # "less than or equal" spelled as "< or ==": == falls back to identity for objects that define
    # only <, so equal neighbours pass as strictly sorted
    wrong=[("more_itertools/more.py", _MI_IS_SORTED_COMPARE,
            "    compare = (lambda x, y: x < y or x == y) if strict else lt\n")],
    tried=[
        # strict dropped to the non-strict test (only < is available, so strictness is given up)
        [("more_itertools/more.py", _MI_IS_SORTED_COMPARE, "    compare = lt\n")],
        # <= rewritten with < but with the operands the wrong way round
        [("more_itertools/more.py", _MI_IS_SORTED_COMPARE,
          "    compare = (lambda x, y: not x < y) if strict else lt\n")],
    ],
    statement="is_sorted(strict=True) needs <=.\n\n"
              "`is_sorted(items, strict=True)` raises TypeError for objects that only define `__lt__` (as "
              "`sorted()` needs), because it compares with `<=`. It should rely on `<` alone, with the same "
              "results for every combination of *key*, *reverse* and *strict*.\n",
)
