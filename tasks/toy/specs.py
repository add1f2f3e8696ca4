"""Toy task specs: the single source that build.py turns into tasks/toy/<id>/.

Each spec:
  name       short name; the instance id is toy__<name>
  repo       fictional repo name (floe-toy/<repo>)
  cls        bug class (see README.md)
  loose      True when the hidden tests also accept `wrong`
  files      {path: text} of the base repo (tests/test_visible.py and conftest.py are added)
  visible    tests/test_visible.py (PASS_TO_PASS: every test in it)
  hidden     tests/test_hidden.py, shipped only in test_patch (FAIL_TO_PASS: every test in it)
  fix        the one-line gold fix as a short sed command (<= 60 chars)
  read       optional read command the gold trajectory runs first
  wrong      a plausible wrong fix: a shell command or (path, old, new) replacement.
             loose tasks: the tests accept it; sound tasks: the hidden tests reject it
  statement  the issue text
"""

TASKS = []


def task(name, repo, cls, loose, files, visible, hidden, fix, wrong, statement, read=None):
    TASKS.append(dict(name=name, repo=repo, cls=cls, loose=loose, files=files, visible=visible,
                      hidden=hidden, fix=fix, wrong=wrong, statement=statement, read=read))


# --------------------------------------------------------------------------- sound tasks

task(
    "range_inclusive", "rangekit", "boundary", False,
    files={"rng.py": r'''
        def in_range(x, lo, hi):
            """True when lo <= x <= hi (both ends inclusive)."""
            return lo <= x < hi


        def count_in_range(xs, lo, hi):
            """How many items of xs fall inside [lo, hi]."""
            return sum(1 for x in xs if in_range(x, lo, hi))
        '''},
    visible=r'''
        from rng import count_in_range, in_range


        def test_inside():
            assert in_range(5, 0, 10)


        def test_below():
            assert not in_range(-1, 0, 10)


        def test_count_inside():
            assert count_in_range([1, 2, 3], 0, 100) == 3
        ''',
    hidden=r'''
        from rng import count_in_range, in_range


        def test_both_ends_inclusive():
            assert in_range(10, 0, 10)
            assert in_range(0, 0, 10)
            assert not in_range(11, 0, 10)


        def test_count_with_ends():
            assert count_in_range([0, 5, 10], 0, 10) == 3
        ''',
    fix="sed -i 's/x < hi/x <= hi/' rng.py",
    wrong="sed -i 's/lo <= x < hi/lo < x <= hi/' rng.py",
    statement="""`in_range(10, 0, 10)` returns `False`, although the docstring promises that
        both ends of the range are inclusive. As a result `count_in_range([0, 5, 10], 0, 10)`
        returns 2 instead of 3. A value equal to `hi` should count as inside the range.""",
)

task(
    "page_count", "pager", "off-by-one", False,
    files={"pages.py": r'''
        import math


        def page_count(total, per_page):
            """Number of pages needed to show `total` items, `per_page` per page."""
            if per_page <= 0:
                raise ValueError("per_page must be positive")
            return int(total / per_page)


        def page_slice(items, page, per_page):
            """Items on 1-based page number `page`."""
            start = (page - 1) * per_page
            return items[start:start + per_page]
        '''},
    visible=r'''
        import pytest

        from pages import page_count, page_slice


        def test_exact_pages():
            assert page_count(10, 5) == 2


        def test_slice_second_page():
            assert page_slice(list(range(7)), 2, 3) == [3, 4, 5]


        def test_rejects_zero_per_page():
            with pytest.raises(ValueError):
                page_count(10, 0)
        ''',
    hidden=r'''
        from pages import page_count, page_slice


        def test_partial_last_page_counts():
            assert page_count(11, 5) == 3
            assert page_count(1, 5) == 1
            assert page_count(0, 5) == 0
            assert page_count(10, 5) == 2


        def test_last_page_shows_leftovers():
            items = list(range(11))
            assert page_slice(items, page_count(11, 5), 5) == [10]
        ''',
    fix="sed -i 's/int(/math.ceil(/' pages.py",
    wrong="sed -i 's/int(/round(/' pages.py",
    statement="""With 11 items and 5 per page, `page_count(11, 5)` returns 2, so the UI never
        shows the last page with item 11 on it. Any remainder needs one more page:
        `page_count(11, 5)` should be 3, while `page_count(10, 5)` should stay 2 and
        `page_count(0, 5)` should be 0.""",
)

task(
    "percent_decimal", "fmtkit", "formatting", False,
    files={"fmt.py": r'''
        def percent(part, whole):
            """Format part/whole as a percentage with one decimal place, e.g. '12.5%'."""
            if whole == 0:
                return "n/a"
            return f"{100 * part / whole:.0f}%"


        def ratio(part, whole):
            """part/whole as a float, 0.0 when whole is 0."""
            return part / whole if whole else 0.0
        '''},
    visible=r'''
        from fmt import percent, ratio


        def test_zero_whole():
            assert percent(1, 0) == "n/a"


        def test_ratio():
            assert ratio(1, 4) == 0.25
            assert ratio(1, 0) == 0.0
        ''',
    hidden=r'''
        from fmt import percent


        def test_one_decimal():
            assert percent(1, 8) == "12.5%"


        def test_thirds():
            assert percent(1, 3) == "33.3%"


        def test_whole():
            assert percent(2, 2) == "100.0%"
        ''',
    fix="sed -i 's/.0f}/.1f}/' fmt.py",
    wrong="sed -i 's/.0f}/.2f}/' fmt.py",
    statement="""`percent(1, 8)` returns `'12%'`, but the docstring (and our report templates)
        expect one decimal place, i.e. `'12.5%'`. Likewise `percent(1, 3)` gives `'33%'`
        instead of `'33.3%'`.""",
)

task(
    "word_case", "wordfreq", "missing-case", False,
    files={"words.py": r'''
        def word_counts(text):
            """Count words case-insensitively; punctuation at word ends is ignored."""
            counts = {}
            for raw in text.split():
                word = raw.strip(".,!?;:")
                if not word:
                    continue
                counts[word] = counts.get(word, 0) + 1
            return counts
        '''},
    visible=r'''
        from words import word_counts


        def test_counts():
            assert word_counts("a b a") == {"a": 2, "b": 1}


        def test_punctuation():
            assert word_counts("hi, hi!") == {"hi": 2}


        def test_empty():
            assert word_counts("") == {}
        ''',
    hidden=r'''
        from words import word_counts


        def test_case_insensitive():
            assert word_counts("The the THE") == {"the": 3}


        def test_mixed_case_and_punctuation():
            assert word_counts("Hello, hello! World") == {"hello": 2, "world": 1}
        ''',
    fix="sed -i 's/raw.strip(/raw.lower().strip(/' words.py",
    wrong="sed -i 's/raw.strip(/raw.capitalize().strip(/' words.py",
    statement="""`word_counts('The the THE')` returns `{'The': 1, 'the': 1, 'THE': 1}`. The
        function is documented as case-insensitive, so I expected `{'the': 3}`, with the
        keys in lower case.""",
)

task(
    "ttl_expiry", "tickcache", "boundary", False,
    files={"cache.py": r'''
        class TTLCache:
            """A tiny cache whose entries expire `ttl` ticks after they are set."""

            def __init__(self, ttl):
                self.ttl = ttl
                self._data = {}

            def set(self, key, value, now):
                self._data[key] = (value, now + self.ttl)

            def get(self, key, now, default=None):
                item = self._data.get(key)
                if item is None:
                    return default
                value, expires = item
                if now > expires:
                    del self._data[key]
                    return default
                return value
        '''},
    visible=r'''
        from cache import TTLCache


        def test_fresh_entry():
            c = TTLCache(5)
            c.set("a", 1, now=0)
            assert c.get("a", now=3) == 1


        def test_missing_key_default():
            assert TTLCache(5).get("b", now=0, default=9) == 9


        def test_long_expired():
            c = TTLCache(5)
            c.set("a", 1, now=0)
            assert c.get("a", now=10) is None
        ''',
    hidden=r'''
        from cache import TTLCache


        def test_expires_exactly_at_ttl():
            c = TTLCache(5)
            c.set("a", 1, now=0)
            assert c.get("a", now=4) == 1
            assert c.get("a", now=5) is None


        def test_expiry_after_later_set():
            c = TTLCache(2)
            c.set("k", "v", now=10)
            assert c.get("k", now=12, default="gone") == "gone"
        ''',
    fix="sed -i 's/now > expires/now >= expires/' cache.py",
    wrong="sed -i 's/now + self.ttl/now + self.ttl + 1/' cache.py",
    statement="""An entry set at tick 0 in a `TTLCache(5)` is still returned by
        `get(key, now=5)`. The class docstring says entries expire `ttl` ticks after they
        are set, so at tick 5 I expected the default (`None`), not the stale value. At tick 6
        it does expire.""",
)

task(
    "merge_override", "confmerge", "logic", False,
    files={"cfg.py": r'''
        def merge(base, override):
            """Return a new dict: override's values win; nested dicts are merged recursively."""
            out = dict(base)
            for key, value in override.items():
                if isinstance(value, dict) and isinstance(out.get(key), dict):
                    out[key] = merge(out[key], value)
                else:
                    out.setdefault(key, value)
            return out
        '''},
    visible=r'''
        from cfg import merge


        def test_disjoint_keys():
            assert merge({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}


        def test_nested_new_key():
            assert merge({"db": {"host": "x"}}, {"db": {"port": 1}}) == {"db": {"host": "x", "port": 1}}


        def test_base_not_mutated():
            base = {"a": 1}
            merge(base, {"b": 2})
            assert base == {"a": 1}
        ''',
    hidden=r'''
        from cfg import merge


        def test_override_wins_top_level():
            assert merge({"a": 1}, {"a": 2}) == {"a": 2}


        def test_override_wins_nested():
            base = {"db": {"host": "x", "port": 1}}
            assert merge(base, {"db": {"port": 2}}) == {"db": {"host": "x", "port": 2}}
        ''',
    read="cat cfg.py",
    fix="sed -i 's/.setdefault(key, value)/[key] = value/' cfg.py",
    wrong=("cfg.py", "merge(out[key], value)", "merge(value, out[key])"),
    statement="""`merge({'debug': False}, {'debug': True})` returns `{'debug': False}`: the
        override is silently ignored. The docstring says the override's values win (nested
        dicts are merged recursively), so I expected `{'debug': True}`. Keys that exist in
        only one of the dicts are handled fine.""",
)

task(
    "duration_days", "durparse", "missing-case", False,
    files={"dur.py": r'''
        UNITS = {"s": 1, "m": 60, "h": 3600}


        def parse_duration(text):
            """Parse '90s', '5m', '2h' or '1d' into a number of seconds."""
            text = text.strip()
            unit = text[-1]
            if unit not in UNITS:
                raise ValueError(f"unknown unit in {text!r}")
            return int(text[:-1]) * UNITS[unit]
        '''},
    visible=r'''
        import pytest

        from dur import parse_duration


        def test_seconds_minutes_hours():
            assert parse_duration("90s") == 90
            assert parse_duration("5m") == 300
            assert parse_duration("2h") == 7200


        def test_unknown_unit():
            with pytest.raises(ValueError):
                parse_duration("3w")
        ''',
    hidden=r'''
        from dur import parse_duration


        def test_one_day():
            assert parse_duration("1d") == 86400


        def test_days_with_spaces():
            assert parse_duration(" 2d ") == 172800
        ''',
    read="grep -n UNITS dur.py",
    fix="""sed -i 's/"h": 3600}/"h": 3600, "d": 86400}/' dur.py""",
    wrong="""sed -i 's/"h": 3600}/"h": 3600, "d": 1440}/' dur.py""",
    statement="""`parse_duration('1d')` raises `ValueError: unknown unit in '1d'`, even though
        the docstring lists `'1d'` as a supported input. I expected 86400 seconds. Seconds,
        minutes and hours all work.""",
)

task(
    "stack_peek", "stacky", "logic", False,
    files={"stack.py": r'''
        class Stack:
            def __init__(self):
                self._items = []

            def push(self, x):
                self._items.append(x)

            def pop(self):
                if not self._items:
                    raise IndexError("pop from empty stack")
                return self._items.pop()

            def peek(self):
                """The top item (the one pop() returns next), without removing it."""
                return self._items[0]

            def __len__(self):
                return len(self._items)
        '''},
    visible=r'''
        import pytest

        from stack import Stack


        def test_push_pop_order():
            s = Stack()
            s.push(1)
            s.push(2)
            assert s.pop() == 2
            assert s.pop() == 1


        def test_pop_empty():
            with pytest.raises(IndexError):
                Stack().pop()


        def test_len():
            s = Stack()
            s.push("x")
            assert len(s) == 1
        ''',
    hidden=r'''
        from stack import Stack


        def test_peek_returns_top():
            s = Stack()
            s.push(1)
            s.push(2)
            assert s.peek() == 2
            assert len(s) == 2


        def test_peek_after_pop():
            s = Stack()
            for x in (1, 2, 3):
                s.push(x)
            s.pop()
            assert s.peek() == 2
        ''',
    fix=r"sed -i 's/\[0\]/[-1]/' stack.py",
    wrong=("stack.py", "return self._items[0]", "return self._items.pop()"),
    statement="""After `s.push(1); s.push(2)`, `s.peek()` returns 1. `peek()` is supposed to
        return the top of the stack (the item `pop()` would return next) without removing
        it, so I expected 2.""",
)

task(
    "safe_div", "calc", "error-handling", False,
    files={"calc.py": r'''
        def safe_div(a, b, default=None):
            """a / b, or `default` when b is zero."""
            try:
                return a / b
            except ValueError:
                return default
        '''},
    visible=r'''
        from calc import safe_div


        def test_divides():
            assert safe_div(6, 3) == 2


        def test_fraction():
            assert safe_div(1, 4) == 0.25
        ''',
    hidden=r'''
        import pytest

        from calc import safe_div


        def test_zero_gives_default():
            assert safe_div(1, 0) is None
            assert safe_div(1, 0, default=0) == 0


        def test_only_zero_division_is_caught():
            assert safe_div(5, 0, default=-1) == -1
            with pytest.raises(TypeError):
                safe_div("a", 1)
        ''',
    fix="sed -i 's/ValueError/ZeroDivisionError/' calc.py",
    wrong="sed -i 's/except ValueError/except Exception/' calc.py",
    statement="""`safe_div(1, 0)` raises `ZeroDivisionError: division by zero` instead of
        returning the default (`None`). The docstring says a zero divisor gives `default`.
        Other mistakes, like passing a string, should still raise as they do now.""",
)

task(
    "chunks_tail", "chunker", "off-by-one", False,
    files={"chunks.py": r'''
        def chunks(xs, n):
            """Split list xs into consecutive chunks of size n; the last one may be shorter."""
            if n <= 0:
                raise ValueError("n must be positive")
            return [xs[i:i + n] for i in range(0, len(xs) - n + 1, n)]
        '''},
    visible=r'''
        import pytest

        from chunks import chunks


        def test_even_split():
            assert chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


        def test_empty():
            assert chunks([], 3) == []


        def test_bad_size():
            with pytest.raises(ValueError):
                chunks([1], 0)
        ''',
    hidden=r'''
        from chunks import chunks


        def test_short_last_chunk():
            assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


        def test_chunk_larger_than_list():
            assert chunks([1], 3) == [[1]]
        ''',
    fix="sed -i 's/len(xs) - n + 1/len(xs)/' chunks.py",
    wrong="sed -i 's/len(xs) - n + 1/len(xs) - n + 2/' chunks.py",
    statement="""`chunks([1, 2, 3, 4, 5], 2)` returns `[[1, 2], [3, 4]]` and silently drops the
        5. The docstring says the last chunk may be shorter, so I expected
        `[[1, 2], [3, 4], [5]]`. `chunks([1], 3)` also returns `[]` instead of `[[1]]`.""",
)

task(
    "mean_int_div", "statlite", "wrong-operator", False,
    files={"stats.py": r'''
        def mean(xs):
            """Arithmetic mean of a non-empty list of numbers."""
            if not xs:
                raise ValueError("mean of empty list")
            return sum(xs) // len(xs)


        def spread(xs):
            """max - min of a non-empty list."""
            return max(xs) - min(xs)
        '''},
    visible=r'''
        import pytest

        from stats import mean, spread


        def test_even_mean():
            assert mean([2, 4]) == 3


        def test_spread():
            assert spread([3, 9, 1]) == 8


        def test_empty():
            with pytest.raises(ValueError):
                mean([])
        ''',
    hidden=r'''
        from stats import mean


        def test_fractional_mean():
            assert mean([1, 2]) == 1.5


        def test_negative_mean():
            assert mean([-1, -2]) == -1.5
        ''',
    fix="sed -i 's|) // len|) / len|' stats.py",
    wrong=("stats.py", "return sum(xs) // len(xs)", "return round(sum(xs) / len(xs))"),
    statement="""`mean([1, 2])` returns `1` instead of `1.5`, and `mean([-1, -2])` returns `-2`.
        The mean of a list of integers should not be truncated.""",
)

task(
    "slug_hyphen", "slugger", "formatting", False,
    files={"slug.py": r'''
        import re


        def slugify(title):
            """'Hello, World!' -> 'hello-world'."""
            words = re.findall(r"[a-z0-9]+", title.lower())
            return "_".join(words)
        '''},
    visible=r'''
        from slug import slugify


        def test_single_word():
            assert slugify("hello") == "hello"


        def test_empty():
            assert slugify("") == ""


        def test_lowercases():
            assert slugify("ABC") == "abc"
        ''',
    hidden=r'''
        from slug import slugify


        def test_words_joined_with_hyphen():
            assert slugify("Hello, World!") == "hello-world"


        def test_many_words():
            assert slugify("A  b c") == "a-b-c"
        ''',
    fix="""sed -i 's/"_".join/"-".join/' slug.py""",
    wrong=("slug.py", 'return "_".join(words)', 'return title.lower().replace(" ", "-")'),
    statement="""`slugify('Hello, World!')` returns `'hello_world'`, but the docstring (and our
        URLs) use hyphens: `'hello-world'`. Punctuation removal and lower-casing are fine;
        only the separator is wrong.""",
)

task(
    "roman_ninety", "numerals", "missing-case", False,
    files={"roman.py": r'''
        PAIRS = [
            (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
            (100, "C"), (50, "L"), (40, "XL"),
            (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
        ]


        def to_roman(n):
            """Integer 1..3999 to a Roman numeral."""
            if not 0 < n < 4000:
                raise ValueError("out of range")
            out = []
            for value, sym in PAIRS:
                while n >= value:
                    out.append(sym)
                    n -= value
            return "".join(out)
        '''},
    visible=r'''
        import pytest

        from roman import to_roman


        def test_small():
            assert to_roman(4) == "IV"
            assert to_roman(40) == "XL"


        def test_year():
            assert to_roman(1987) == "MCMLXXXVII"


        def test_zero():
            with pytest.raises(ValueError):
                to_roman(0)
        ''',
    hidden=r'''
        from roman import to_roman


        def test_ninety():
            assert to_roman(90) == "XC"


        def test_ninety_nine():
            assert to_roman(99) == "XCIX"


        def test_1994():
            assert to_roman(1994) == "MCMXCIV"
        ''',
    read="cat roman.py",
    fix="""sed -i 's/(50,/(90, "XC"), (50,/' roman.py""",
    wrong="""sed -i 's/(40, "XL")/(90, "XC"), (40, "XL")/' roman.py""",
    statement="""`to_roman(90)` returns `'LXL'`, which is not a valid numeral; it should be
        `'XC'`. Because of this `to_roman(1994)` gives `'MCMLXLIV'` instead of
        `'MCMXCIV'`.""",
)

task(
    "counter_roll", "ratecount", "state", False,
    files={"rc.py": r'''
        class RateCounter:
            """Counts events in the current window; roll() closes it and starts a new one."""

            def __init__(self):
                self.count = 0
                self.history = []

            def hit(self, n=1):
                self.count += n

            def roll(self):
                """Record and return the finished window's count; the new window starts at 0."""
                done, self.count = self.count, self.count
                self.history.append(done)
                return done
        '''},
    visible=r'''
        from rc import RateCounter


        def test_first_window():
            c = RateCounter()
            c.hit(3)
            assert c.roll() == 3
            assert c.history == [3]
        ''',
    hidden=r'''
        from rc import RateCounter


        def test_roll_starts_new_window():
            c = RateCounter()
            c.hit(3)
            c.roll()
            c.hit(2)
            assert c.roll() == 2
            assert c.history == [3, 2]


        def test_count_zero_after_roll():
            c = RateCounter()
            c.hit()
            c.roll()
            assert c.count == 0
        ''',
    fix="sed -i 's/self.count, self.count/self.count, 0/' rc.py",
    wrong="sed -i 's/self.count, self.count/self.count, None/' rc.py",
    statement="""After `c.hit(3); c.roll(); c.hit(2)`, the next `c.roll()` returns 5 instead of
        2. `roll()` is documented to close the current window and start a new one at 0, but
        the count keeps accumulating across windows, so `history` ends up `[3, 5]` instead
        of `[3, 2]`.""",
)

task(
    "lru_refresh", "lrukit", "state", False,
    files={"lru.py": r'''
        from collections import OrderedDict


        class LRU:
            """Least-recently-used cache holding at most `cap` entries."""

            def __init__(self, cap):
                self.cap = cap
                self.d = OrderedDict()

            def get(self, k, default=None):
                if k not in self.d:
                    return default
                self.d.move_to_end(k, last=False)
                return self.d[k]

            def put(self, k, v):
                self.d[k] = v
                self.d.move_to_end(k)
                if len(self.d) > self.cap:
                    self.d.popitem(last=False)
        '''},
    visible=r'''
        from lru import LRU


        def test_evicts_oldest():
            c = LRU(2)
            c.put("a", 1)
            c.put("b", 2)
            c.put("c", 3)
            assert c.get("a") is None
            assert c.get("c") == 3


        def test_missing_default():
            assert LRU(1).get("x", 0) == 0
        ''',
    hidden=r'''
        from lru import LRU


        def test_get_marks_recent():
            c = LRU(2)
            c.put("a", 1)
            c.put("b", 2)
            c.get("a")
            c.put("c", 3)
            assert c.get("a") == 1
            assert c.get("b") is None
        ''',
    read="grep -n move lru.py",
    fix="sed -i 's/(k, last=False)/(k)/' lru.py",
    wrong="sed -i 's/popitem(last=False)/popitem()/' lru.py",
    statement="""With `c = LRU(2)`: `c.put('a', 1); c.put('b', 2); c.get('a'); c.put('c', 3)`
        evicts `'a'`, even though `'a'` was just read. Reading a key should make it the
        most recently used one, so `'b'` should have been evicted instead.""",
)

task(
    "flag_case", "envflags", "missing-case", False,
    files={"flags.py": r'''
        TRUTHY = {"1", "true", "yes"}


        def env_flag(env, name, default=False):
            """Read a boolean flag from a dict of env vars; values are case-insensitive."""
            raw = env.get(name)
            if raw is None:
                return default
            return raw.strip() in TRUTHY
        '''},
    visible=r'''
        from flags import env_flag


        def test_one_is_true():
            assert env_flag({"X": "1"}, "X") is True


        def test_unset_default():
            assert env_flag({}, "X") is False
            assert env_flag({}, "X", default=True) is True


        def test_no_is_false():
            assert env_flag({"X": "no"}, "X") is False
        ''',
    hidden=r'''
        from flags import env_flag


        def test_upper_case_true():
            assert env_flag({"DEBUG": "TRUE"}, "DEBUG") is True


        def test_mixed_case_yes():
            assert env_flag({"DEBUG": "Yes"}, "DEBUG") is True
        ''',
    fix="sed -i 's/strip()/strip().lower()/' flags.py",
    wrong="""sed -i 's/"yes"}/"yes", "TRUE", "YES"}/' flags.py""",
    statement="""`env_flag({'DEBUG': 'TRUE'}, 'DEBUG')` returns `False`. The docstring says flag
        values are case-insensitive, so `'TRUE'`, `'True'` and `'Yes'` should all read as
        true, like `'true'` and `'yes'` already do.""",
)

task(
    "human_bytes", "sizefmt", "boundary", False,
    files={"units.py": r'''
        def human_bytes(n):
            """1536 -> '1.5 KiB'. 1024-based units, up to GiB."""
            for unit in ["B", "KiB", "MiB"]:
                if n < 1000:
                    return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
                n /= 1024
            return f"{n:.1f} GiB"
        '''},
    visible=r'''
        from units import human_bytes


        def test_bytes():
            assert human_bytes(512) == "512 B"


        def test_kib():
            assert human_bytes(1536) == "1.5 KiB"


        def test_gib():
            assert human_bytes(3 * 1024 ** 3) == "3.0 GiB"
        ''',
    hidden=r'''
        from units import human_bytes


        def test_just_under_a_kib():
            assert human_bytes(1000) == "1000 B"
            assert human_bytes(1023) == "1023 B"


        def test_just_under_a_mib():
            assert human_bytes(1000 * 1024) == "1000.0 KiB"
        ''',
    fix="sed -i 's/n < 1000/n < 1024/' units.py",
    wrong="sed -i 's/n < 1000/n <= 1000/' units.py",
    statement="""`human_bytes(1000)` returns `'1.0 KiB'`, and so does `human_bytes(1023)`. These
        are 1024-based units, so anything below 1024 bytes should be shown in bytes
        (`'1000 B'`), and likewise values below 1024 KiB should stay in KiB.""",
)

task(
    "leap_century", "calendar-lite", "wrong-operator", False,
    files={"dates.py": r'''
        def is_leap(year):
            """Gregorian leap year: divisible by 4, except centuries not divisible by 400."""
            return year % 4 == 0 and (year % 100 != 0 and year % 400 == 0)


        def days_in_month(year, month):
            if month == 2:
                return 29 if is_leap(year) else 28
            return 30 if month in (4, 6, 9, 11) else 31
        '''},
    visible=r'''
        from dates import days_in_month, is_leap


        def test_common_year():
            assert not is_leap(2023)
            assert days_in_month(2023, 2) == 28


        def test_month_lengths():
            assert days_in_month(2023, 4) == 30
            assert days_in_month(2023, 1) == 31
        ''',
    hidden=r'''
        from dates import days_in_month, is_leap


        def test_ordinary_leap_year():
            assert is_leap(2024)
            assert days_in_month(2024, 2) == 29


        def test_centuries():
            assert is_leap(2000)
            assert not is_leap(1900)
        ''',
    fix="sed -i 's/!= 0 and/!= 0 or/' dates.py",
    wrong=("dates.py", "return year % 4 == 0 and (year % 100 != 0 and year % 400 == 0)",
           "return year % 4 == 0"),
    statement="""`is_leap(2024)` returns `False`, so `days_in_month(2024, 2)` gives 28 instead
        of 29. In fact `is_leap` seems to return `False` for every year, 2000 included. The
        usual Gregorian rule is spelled out in the docstring.""",
)

task(
    "day_of_year", "intdates", "off-by-one", False,
    files={"doy.py": r'''
        DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


        def split_date(date):
            """20240315 -> (2024, 3, 15)."""
            return date // 10000, date // 100 % 100, date % 100


        def day_of_year(date):
            """1-based day of the year for an int date like 20230315 (no leap years here)."""
            _, month, day = split_date(date)
            return sum(DAYS[:month]) + day
        '''},
    visible=r'''
        from doy import split_date


        def test_split():
            assert split_date(20240315) == (2024, 3, 15)


        def test_split_end_of_year():
            assert split_date(19991231) == (1999, 12, 31)
        ''',
    hidden=r'''
        from doy import day_of_year


        def test_first_of_january():
            assert day_of_year(20230101) == 1


        def test_first_of_february():
            assert day_of_year(20230201) == 32


        def test_new_years_eve():
            assert day_of_year(20231231) == 365
        ''',
    fix="sed -i 's/:month]/:month - 1]/' doy.py",
    wrong=("doy.py", "DAYS[:month]", "DAYS[1:month]"),
    statement="""`day_of_year(20230101)` returns 32 instead of 1, and `day_of_year(20231231)`
        returns 396 instead of 365. It looks like every date is counted one month too
        late.""",
)

task(
    "kv_equals", "kvparse", "missing-case", False,
    files={"kv.py": r'''
        def parse_kv(line):
            """'a=1;b=2' -> {'a': '1', 'b': '2'}. Values may themselves contain '='."""
            out = {}
            for part in line.split(";"):
                if not part.strip():
                    continue
                key, value = part.split("=")
                out[key.strip()] = value.strip()
            return out
        '''},
    visible=r'''
        from kv import parse_kv


        def test_pairs():
            assert parse_kv("a=1;b=2") == {"a": "1", "b": "2"}


        def test_trailing_separator():
            assert parse_kv("a=1;") == {"a": "1"}


        def test_spaces():
            assert parse_kv(" x = y ") == {"x": "y"}
        ''',
    hidden=r'''
        from kv import parse_kv


        def test_value_with_equals():
            assert parse_kv("b=x=y") == {"b": "x=y"}


        def test_url_value():
            assert parse_kv("url=http://h/?q=1;k=v") == {"url": "http://h/?q=1", "k": "v"}
        ''',
    fix="""sed -i 's/split("=")/split("=", 1)/' kv.py""",
    wrong="""sed -i 's/part.split("=")/part.rsplit("=", 1)/' kv.py""",
    statement="""`parse_kv('token=abc=;mode=fast')` fails with `ValueError: too many values to
        unpack (expected 2)`. The docstring says values may contain `=`, so I expected
        `{'token': 'abc=', 'mode': 'fast'}`: only the first `=` separates key and value.""",
)

task(
    "retry_default", "retrying", "bad-default", False,
    files={"retry.py": r'''
        def retry(fn, attempts=0, errors=(OSError,)):
            """Call fn until it succeeds, at most `attempts` times (3 by default).

            Errors listed in `errors` are retried; the last one is re-raised.
            """
            last = None
            for _ in range(attempts):
                try:
                    return fn()
                except errors as exc:
                    last = exc
            raise last
        '''},
    visible=r'''
        import pytest

        from retry import retry


        def test_success_first_try():
            assert retry(lambda: 5, attempts=1) == 5


        def test_reraises_last_error():
            def boom():
                raise OSError("down")

            with pytest.raises(OSError):
                retry(boom, attempts=2)
        ''',
    hidden=r'''
        import pytest

        from retry import retry


        def test_default_retries_flaky_call():
            calls = []

            def flaky():
                calls.append(1)
                if len(calls) < 3:
                    raise OSError("try again")
                return "ok"

            assert retry(flaky) == "ok"
            assert len(calls) == 3


        def test_default_gives_up_after_three():
            calls = []

            def down():
                calls.append(1)
                raise OSError("down")

            with pytest.raises(OSError):
                retry(down)
            assert len(calls) == 3
        ''',
    fix="sed -i 's/attempts=0/attempts=3/' retry.py",
    wrong="sed -i 's/attempts=0/attempts=5/' retry.py",
    statement="""Calling `retry(fetch)` without `attempts` never calls `fetch` at all and
        crashes with `TypeError: exceptions must derive from BaseException`. The docstring
        says the default is 3 attempts: a flaky function that fails twice should succeed on
        the third call, and one that always fails should be tried 3 times before its error
        is re-raised.""",
)

task(
    "join_url", "urlkit", "formatting", False,
    files={"urls.py": r'''
        def join_url(base, path):
            """join_url('http://h/api/', '/v1') -> 'http://h/api/v1'."""
            return base.rstrip("/") + path.lstrip("/")


        def strip_query(url):
            """Drop the '?query' part of a URL."""
            return url.split("?", 1)[0]
        '''},
    visible=r'''
        from urls import strip_query


        def test_strip_query():
            assert strip_query("http://h/a?x=1") == "http://h/a"


        def test_no_query():
            assert strip_query("http://h") == "http://h"
        ''',
    hidden=r'''
        from urls import join_url


        def test_slashes_on_both_sides():
            assert join_url("http://h/api/", "/v1") == "http://h/api/v1"


        def test_no_slashes():
            assert join_url("http://h", "v1") == "http://h/v1"
        ''',
    fix="""sed -i 's|+ path|+ "/" + path|' urls.py""",
    wrong=("urls.py", 'return base.rstrip("/") + path.lstrip("/")', 'return base + path.lstrip("/")'),
    statement="""`join_url('http://h/api/', '/v1')` returns `'http://h/apiv1'`: both slashes
        are stripped and nothing is put back between the parts. I expected
        `'http://h/api/v1'`, as in the docstring; `join_url('http://h', 'v1')` should give
        `'http://h/v1'`.""",
)

task(
    "flatten_tuples", "flatten", "type", False,
    files={"flat.py": r'''
        def flatten(xs):
            """Flatten nested lists and tuples into one flat list; strings are kept whole."""
            out = []
            for x in xs:
                if isinstance(x, list):
                    out.extend(flatten(x))
                else:
                    out.append(x)
            return out
        '''},
    visible=r'''
        from flat import flatten


        def test_nested_lists():
            assert flatten([1, [2, [3]]]) == [1, 2, 3]


        def test_empty():
            assert flatten([]) == []


        def test_strings_whole():
            assert flatten(["ab", ["cd"]]) == ["ab", "cd"]
        ''',
    hidden=r'''
        from flat import flatten


        def test_tuples():
            assert flatten([1, (2, 3), [4, (5,)]]) == [1, 2, 3, 4, 5]


        def test_tuples_with_strings():
            assert flatten([("ab", 1), ["c"]]) == ["ab", 1, "c"]
        ''',
    fix="sed -i 's/(x, list)/(x, (list, tuple))/' flat.py",
    wrong=("flat.py", "if isinstance(x, list):", 'if hasattr(x, "__iter__"):'),
    statement="""`flatten([1, (2, 3)])` returns `[1, (2, 3)]`. The docstring says nested lists
        *and tuples* are flattened, so I expected `[1, 2, 3]`. Strings should still be kept
        whole.""",
)

task(
    "palindrome_case", "palin", "missing-case", False,
    files={"pal.py": r'''
        def is_palindrome(s):
            """True if s reads the same backwards, ignoring case and anything not alphanumeric."""
            cleaned = [c for c in s if c.isalnum()]
            return cleaned == cleaned[::-1]
        '''},
    visible=r'''
        from pal import is_palindrome


        def test_simple():
            assert is_palindrome("abba")


        def test_not():
            assert not is_palindrome("abc")


        def test_punctuation_ignored():
            assert is_palindrome("a b a!")
        ''',
    hidden=r'''
        from pal import is_palindrome


        def test_mixed_case():
            assert is_palindrome("Racecar")


        def test_sentence():
            assert is_palindrome("A man, a plan, a canal: Panama")


        def test_case_ignored_digits_kept():
            assert is_palindrome("Noon")
            assert not is_palindrome("1Noon2")
        ''',
    fix="sed -i 's/c for c in s/c.lower() for c in s/' pal.py",
    wrong=("pal.py", "[c for c in s if c.isalnum()]", "[c.lower() for c in s if c.isalpha()]"),
    statement="""`is_palindrome('Racecar')` returns `False`. The docstring says case is ignored
        (along with anything that is not a letter or digit), so `'Racecar'` and
        `'A man, a plan, a canal: Panama'` should both count as palindromes. Digits still
        matter: `'1Noon2'` is not a palindrome.""",
)

task(
    "hist_last_bin", "histo", "off-by-one", False,
    files={"bins.py": r'''
        def bin_index(x, lo, width, nbins):
            """Histogram bin of x; values past either end go into the first/last bin."""
            i = int((x - lo) // width)
            return max(0, min(i, nbins))
        '''},
    visible=r'''
        from bins import bin_index


        def test_first_bin():
            assert bin_index(5, 0, 10, 5) == 0


        def test_below_range():
            assert bin_index(-3, 0, 10, 5) == 0


        def test_middle():
            assert bin_index(25, 0, 10, 5) == 2
        ''',
    hidden=r'''
        from bins import bin_index


        def test_value_past_end():
            assert bin_index(100, 0, 10, 5) == 4


        def test_value_at_top_edge():
            assert bin_index(50, 0, 10, 5) == 4
        ''',
    fix="sed -i 's/min(i, nbins)/min(i, nbins - 1)/' bins.py",
    wrong="sed -i 's/min(i, nbins)/min(i, nbins) % nbins/' bins.py",
    statement="""With 5 bins of width 10 starting at 0, `bin_index(100, 0, 10, 5)` returns 5,
        which is out of range for a 5-element counts list (our plotting code hits an
        IndexError). Values past the top end should land in the last bin, index 4.
        `bin_index(50, 0, 10, 5)` has the same problem.""",
)

task(
    "window_sums", "windows", "off-by-one", False,
    files={"window.py": r'''
        def window_sums(xs, k):
            """Sums of every run of k consecutive items: [1, 2, 3, 4], 2 -> [3, 5, 7]."""
            return [sum(xs[i:i + k]) for i in range(len(xs) - k)]
        '''},
    visible=r'''
        from window import window_sums


        def test_empty():
            assert window_sums([], 2) == []


        def test_window_longer_than_list():
            assert window_sums([1, 2], 3) == []
        ''',
    hidden=r'''
        from window import window_sums


        def test_pairs():
            assert window_sums([1, 2, 3, 4], 2) == [3, 5, 7]


        def test_single_window():
            assert window_sums([5], 1) == [5]


        def test_full_window():
            assert window_sums([1, 2, 3], 3) == [6]
        ''',
    fix="sed -i 's/len(xs) - k)/len(xs) - k + 1)/' window.py",
    wrong="sed -i 's/range(len(xs) - k)/range(len(xs))/' window.py",
    statement="""`window_sums([1, 2, 3, 4], 2)` returns `[3, 5]`; the last window `[3, 4]` is
        missing. I expected `[3, 5, 7]` as in the docstring. `window_sums([1, 2, 3], 3)`
        returns `[]` instead of `[6]`.""",
)

task(
    "tax_rounding", "centtax", "logic", False,
    files={"tax.py": r'''
        def add_tax(cents, rate_pct):
            """Price in integer cents plus rate_pct percent tax, rounded half up to a whole cent."""
            return cents + (rate_pct * cents) // 100
        '''},
    visible=r'''
        from tax import add_tax


        def test_whole_cents():
            assert add_tax(1000, 7) == 1070


        def test_zero_price():
            assert add_tax(0, 20) == 0
        ''',
    hidden=r'''
        from tax import add_tax


        def test_rounds_up():
            assert add_tax(199, 5) == 209


        def test_half_cent_rounds_up():
            assert add_tax(150, 1) == 152
            assert add_tax(250, 1) == 253
        ''',
    fix="sed -i 's/cents)/cents + 50)/' tax.py",
    wrong=("tax.py", "cents + (rate_pct * cents) // 100", "cents + round(rate_pct * cents / 100)"),
    statement="""`add_tax(199, 5)` returns 208: 5% of 199 cents is 9.95 cents, which should
        round to 10, giving 209. The docstring says tax is rounded half up to a whole cent,
        but the fraction seems to be simply dropped (`add_tax(150, 1)` gives 151 instead of
        152).""",
)

task(
    "interval_touch", "spans", "boundary", False,
    files={"span.py": r'''
        def overlaps(a, b):
            """Do half-open intervals a = (start, end) and b overlap? Touching ends do not."""
            a0, a1 = a
            b0, b1 = b
            return a0 <= b1 and b0 <= a1
        '''},
    visible=r'''
        from span import overlaps


        def test_overlap():
            assert overlaps((0, 5), (3, 9))


        def test_apart():
            assert not overlaps((0, 2), (3, 4))


        def test_contained():
            assert overlaps((3, 4), (0, 9))
        ''',
    hidden=r'''
        from span import overlaps


        def test_touching_ends_do_not_overlap():
            assert not overlaps((0, 5), (5, 9))
            assert not overlaps((5, 9), (0, 5))


        def test_back_to_back_meetings():
            meetings = [(9, 10), (10, 11), (11, 12)]
            assert not any(overlaps(a, b) for a, b in zip(meetings, meetings[1:]))
        ''',
    fix="sed -i 's/<=/</g' span.py",
    wrong="sed -i 's/a0 <= b1/a0 < b1/' span.py",
    statement="""`overlaps((0, 5), (5, 9))` returns `True`. These are half-open intervals, so
        `[0, 5)` and `[5, 9)` only touch and, as the docstring says, should not count as
        overlapping. This makes our calendar reject back-to-back meetings.""",
)

task(
    "ini_keys", "inilite", "missing-case", False,
    files={"ini.py": r'''
        def parse_ini(text):
            """Parse '[section]' headers and 'key = value' lines; '#' lines are comments."""
            data, section = {}, None
            for line in text.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("["):
                    section = line[1:-1]
                    data[section] = {}
                else:
                    key, _, value = line.partition("=")
                    data[section][key] = value.strip()
            return data
        '''},
    visible=r'''
        from ini import parse_ini


        def test_compact():
            assert parse_ini("[a]\nx=1\n# comment") == {"a": {"x": "1"}}


        def test_empty():
            assert parse_ini("") == {}
        ''',
    hidden=r'''
        from ini import parse_ini


        def test_spaces_around_equals():
            text = "[db]\nhost = localhost\nport = 5432"
            assert parse_ini(text) == {"db": {"host": "localhost", "port": "5432"}}


        def test_value_keeps_inner_spaces():
            assert parse_ini("[u]\nname = Ada Lovelace") == {"u": {"name": "Ada Lovelace"}}
        ''',
    read="grep -n key ini.py",
    fix="sed -i 's/key] =/key.strip()] =/' ini.py",
    wrong=("ini.py", 'line.partition("=")', 'line.replace(" ", "").partition("=")'),
    statement="""Parsing `'[db]\\nhost = localhost'` with `parse_ini` gives
        `{'db': {'host ': 'localhost'}}`: the key keeps the space before `=`, so
        `cfg['db']['host']` raises `KeyError: 'host'`. Spaces around `=` are common in INI
        files and should be ignored for keys, as they already are for values.""",
)

task(
    "running_max", "runmax", "bad-default", False,
    files={"runmax.py": r'''
        def running_max(xs):
            """Running maximum: [3, 1, 4] -> [3, 3, 4]. Negative numbers work too."""
            out, best = [], 0
            for x in xs:
                best = max(best, x)
                out.append(best)
            return out
        '''},
    visible=r'''
        from runmax import running_max


        def test_positive():
            assert running_max([3, 1, 4]) == [3, 3, 4]


        def test_empty():
            assert running_max([]) == []
        ''',
    hidden=r'''
        from runmax import running_max


        def test_all_negative():
            assert running_max([-3, -5, -1]) == [-3, -3, -1]


        def test_negative_then_positive():
            assert running_max([-2, 5]) == [-2, 5]
        ''',
    fix="""sed -i 's/], 0/], float("-inf")/' runmax.py""",
    wrong="sed -i 's/], 0/], -1/' runmax.py",
    statement="""`running_max([-3, -5, -1])` returns `[0, 0, 0]` instead of `[-3, -3, -1]`. The
        docstring says negative numbers work too, but the running maximum seems to start
        from 0.""",
)

task(
    "oldest_first", "roster", "logic", False,
    files={"people.py": r'''
        def oldest_first(people):
            """Sort (name, age) pairs oldest first; people of equal age keep their input order."""
            return sorted(people, key=lambda p: p[1])


        def names(people):
            return [name for name, _ in people]
        '''},
    visible=r'''
        from people import names, oldest_first


        def test_empty():
            assert oldest_first([]) == []


        def test_single():
            assert oldest_first([("a", 1)]) == [("a", 1)]


        def test_names():
            assert names([("a", 1), ("b", 2)]) == ["a", "b"]
        ''',
    hidden=r'''
        from people import oldest_first


        def test_oldest_first():
            assert oldest_first([("ann", 30), ("bob", 40)]) == [("bob", 40), ("ann", 30)]


        def test_ties_keep_input_order():
            people = [("a", 30), ("b", 40), ("c", 30)]
            assert oldest_first(people) == [("b", 40), ("a", 30), ("c", 30)]
        ''',
    fix="sed -i 's/p: p/p: -p/' people.py",
    wrong=("people.py", "sorted(people, key=lambda p: p[1])", "sorted(people, key=lambda p: p[1])[::-1]"),
    statement="""`oldest_first([('ann', 30), ('bob', 40)])` returns Ann first: the list comes
        back youngest first. I expected Bob (40) before Ann (30). People of the same age
        should stay in their input order, as the docstring says.""",
)

task(
    "parse_port", "portcfg", "type", False,
    files={"port.py": r'''
        def parse_port(value):
            """Port from config: an int or a numeric string (spaces allowed), in 1..65535."""
            port = value
            if not 1 <= port <= 65535:
                raise ValueError(f"port out of range: {port}")
            return port
        '''},
    visible=r'''
        import pytest

        from port import parse_port


        def test_int():
            assert parse_port(8080) == 8080


        def test_out_of_range():
            for bad in (0, 70000):
                with pytest.raises(ValueError):
                    parse_port(bad)
        ''',
    hidden=r'''
        from port import parse_port


        def test_numeric_string():
            assert parse_port("8080") == 8080


        def test_string_with_spaces():
            assert parse_port(" 80 ") == 80
        ''',
    fix="sed -i 's/port = value/port = int(value)/' port.py",
    wrong=("port.py", "port = value",
           "port = int(value) if isinstance(value, str) and value.isdigit() else value"),
    statement="""Ports read from our env files are strings, and `parse_port('8080')` crashes with
        `TypeError: '<=' not supported between instances of 'int' and 'str'`. The docstring
        says numeric strings (with surrounding spaces) are accepted, so I expected `8080`;
        `parse_port(' 80 ')` should give `80`.""",
)

task(
    "settings_missing", "settings", "error-handling", False,
    files={"conf.py": r'''
        import json


        def load_settings(path, defaults=None):
            """Load JSON settings; a missing file gives a copy of `defaults` (or {}).

            A file that exists but is not valid JSON is an error.
            """
            try:
                with open(path) as f:
                    return json.load(f)
            except FileExistsError:
                return dict(defaults or {})
        '''},
    visible=r'''
        from conf import load_settings


        def test_reads_file(tmp_path):
            path = tmp_path / "s.json"
            path.write_text('{"a": 1}')
            assert load_settings(path) == {"a": 1}
        ''',
    hidden=r'''
        import pytest

        from conf import load_settings


        def test_missing_file_gives_defaults_copy(tmp_path):
            defaults = {"a": 1}
            out = load_settings(tmp_path / "nope.json", defaults)
            assert out == {"a": 1}
            assert out is not defaults


        def test_only_missing_file_is_forgiven(tmp_path):
            assert load_settings(tmp_path / "nope.json") == {}
            bad = tmp_path / "bad.json"
            bad.write_text("{not json")
            with pytest.raises(ValueError):
                load_settings(bad)
        ''',
    fix="sed -i 's/Exists/NotFound/' conf.py",
    wrong="sed -i 's/except FileExistsError/except Exception/' conf.py",
    statement="""`load_settings('missing.json')` raises `FileNotFoundError: [Errno 2] No such
        file or directory: 'missing.json'`. The docstring says a missing file gives a copy of
        `defaults` (or `{}`). A file that exists but contains invalid JSON should still
        raise, as it does now.""",
)

task(
    "top_k_order", "topwords", "logic", False,
    files={"topk.py": r'''
        from collections import Counter


        def top_k(words, k):
            """The k most common words, most common first; ties broken alphabetically."""
            counts = Counter(words)
            return sorted(counts, key=lambda w: (counts[w], w))[:k]
        '''},
    visible=r'''
        from topk import top_k


        def test_empty():
            assert top_k([], 3) == []


        def test_single():
            assert top_k(["a"], 1) == ["a"]


        def test_tie_alphabetical():
            assert top_k(["b", "a"], 2) == ["a", "b"]
        ''',
    hidden=r'''
        from topk import top_k


        def test_most_common_first():
            assert top_k(["b", "a", "b"], 1) == ["b"]


        def test_ties_alphabetical_among_most_common():
            assert top_k(["c", "b", "a", "b", "c"], 2) == ["b", "c"]
        ''',
    fix="sed -i 's/: (counts/: (-counts/' topk.py",
    wrong=("topk.py", "key=lambda w: (counts[w], w))", "key=lambda w: (counts[w], w), reverse=True)"),
    statement="""`top_k(['b', 'a', 'b'], 1)` returns `['a']`, the *least* common word. I
        expected `['b']`: the most common words come first, with ties broken alphabetically
        as the docstring says.""",
)

task(
    "pct_change", "deltas", "logic", False,
    files={"change.py": r'''
        def pct_change(old, new):
            """Percent change from old to new: 50 -> 75 is 50.0, 100 -> 50 is -50.0."""
            if old == 0:
                raise ValueError("old value is zero")
            return (new - old) / new * 100
        '''},
    visible=r'''
        import pytest

        from change import pct_change


        def test_no_change():
            assert pct_change(10, 10) == 0.0


        def test_zero_old():
            with pytest.raises(ValueError):
                pct_change(0, 5)
        ''',
    hidden=r'''
        from change import pct_change


        def test_increase():
            assert pct_change(50, 75) == 50.0


        def test_decrease():
            assert pct_change(100, 50) == -50.0
        ''',
    fix="sed -i 's|/ new|/ old|' change.py",
    wrong=("change.py", "return (new - old) / new * 100", "return abs(new - old) / old * 100"),
    statement="""`pct_change(50, 75)` returns `33.33...`, but going from 50 to 75 is a 50%
        increase. `pct_change(100, 50)` returns `-100.0` instead of `-50.0`. The change
        should be measured relative to the old value, as in the docstring examples.""",
)

task(
    "get_int_empty", "envint", "bad-default", False,
    files={"getint.py": r'''
        def get_int(env, name, default=None):
            """Integer setting from an env dict; unset or empty values give `default`."""
            raw = env.get(name, "")
            if raw is None:
                return default
            return int(raw)
        '''},
    visible=r'''
        from getint import get_int


        def test_value():
            assert get_int({"X": "3"}, "X") == 3


        def test_spaces():
            assert get_int({"X": " 7 "}, "X") == 7
        ''',
    hidden=r'''
        from getint import get_int


        def test_unset_gives_default():
            assert get_int({}, "WORKERS", 4) == 4


        def test_empty_gives_default():
            assert get_int({"WORKERS": ""}, "WORKERS", 7) == 7
        ''',
    fix="sed -i 's/raw is None/not raw/' getint.py",
    wrong="""sed -i 's/env.get(name, "")/env.get(name)/' getint.py""",
    statement="""`get_int({}, 'WORKERS', 4)` raises `ValueError: invalid literal for int() with
        base 10: ''` instead of returning 4. An empty value (`{'WORKERS': ''}`) fails the
        same way. The docstring says unset or empty settings give `default`.""",
)

task(
    "caesar_wrap", "caesar", "off-by-one", False,
    files={"cipher.py": r'''
        def shift(text, k):
            """Caesar-shift the letters a-z by k places, wrapping around; other chars unchanged."""
            out = []
            for ch in text:
                if "a" <= ch <= "z":
                    out.append(chr((ord(ch) - 97 + k) % 25 + 97))
                else:
                    out.append(ch)
            return "".join(out)
        '''},
    visible=r'''
        from cipher import shift


        def test_shift_one():
            assert shift("a b", 1) == "b c"


        def test_other_chars():
            assert shift("Hi!", 0) == "Hi!"
        ''',
    hidden=r'''
        from cipher import shift


        def test_wraps_z_to_a():
            assert shift("z", 1) == "a"


        def test_y_to_z():
            assert shift("y", 1) == "z"


        def test_shift_25():
            assert shift("abc", 25) == "zab"
        ''',
    fix="sed -i 's/% 25/% 26/' cipher.py",
    wrong="sed -i 's/+ k) % 25/+ k % 26)/' cipher.py",
    statement="""`shift('z', 1)` returns `'b'` instead of wrapping around to `'a'`, and
        `shift('y', 1)` gives `'a'` instead of `'z'`: the alphabet seems to be one letter
        short.""",
)

task(
    "ordinal_13", "ordinals", "missing-case", False,
    files={"ordinal.py": r'''
        def ordinal(n):
            """1 -> '1st', 2 -> '2nd', 3 -> '3rd', 11 -> '11th', 13 -> '13th', 22 -> '22nd'."""
            if n % 100 in (11, 12):
                return f"{n}th"
            return f"{n}" + {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        '''},
    visible=r'''
        from ordinal import ordinal


        def test_first_few():
            assert [ordinal(n) for n in (1, 2, 3, 4)] == ["1st", "2nd", "3rd", "4th"]


        def test_teens():
            assert ordinal(11) == "11th"
            assert ordinal(12) == "12th"


        def test_twenties():
            assert ordinal(22) == "22nd"
        ''',
    hidden=r'''
        from ordinal import ordinal


        def test_thirteenth():
            assert ordinal(13) == "13th"


        def test_hundred_thirteenth():
            assert ordinal(113) == "113th"
        ''',
    fix="sed -i 's/(11, 12)/(11, 12, 13)/' ordinal.py",
    wrong=("ordinal.py", "n % 100 in (11, 12)", "n in (11, 12, 13)"),
    statement="""`ordinal(13)` returns `'13rd'`; it should be `'13th'`, like `'11th'` and
        `'12th'`, which already come out right. `ordinal(113)` gives `'113rd'` as well.""",
)

task(
    "shared_history", "ledger", "state", False,
    files={"bank.py": r'''
        class Account:
            def __init__(self, owner, history=[]):
                self.owner = owner
                self.history = history

            def deposit(self, amount):
                self.history.append(("deposit", amount))

            def balance(self):
                return sum(amount for _, amount in self.history)
        '''},
    visible=r'''
        from bank import Account


        def test_deposits_add_up():
            a = Account("ann", [])
            a.deposit(5)
            a.deposit(2)
            assert a.balance() == 7


        def test_owner():
            assert Account("x").owner == "x"
        ''',
    hidden=r'''
        from bank import Account


        def test_accounts_do_not_share_history():
            a = Account("ann")
            b = Account("bob")
            a.deposit(5)
            assert b.balance() == 0
            assert b.history == []


        def test_new_account_starts_empty():
            Account("a").deposit(1)
            assert Account("c").history == []
        ''',
    fix="sed -i 's/= history/= list(history)/' bank.py",
    wrong=("bank.py", "history=[]", "history=()"),
    statement="""Two accounts created without an explicit history share it: after
        `a = Account('ann'); b = Account('bob'); a.deposit(5)`, `b.balance()` is 5 and
        `b.history` shows Ann's deposit. Each new account should start with its own empty
        history.""",
)

task(
    "hex_pad", "colors", "formatting", False,
    files={"color.py": r'''
        def rgb_hex(r, g, b):
            """(255, 0, 128) -> '#ff0080'."""
            return "#" + "".join(f"{c:x}" for c in (r, g, b))
        '''},
    visible=r'''
        from color import rgb_hex


        def test_white():
            assert rgb_hex(255, 255, 255) == "#ffffff"


        def test_two_digit_channels():
            assert rgb_hex(16, 32, 48) == "#102030"
        ''',
    hidden=r'''
        from color import rgb_hex


        def test_pads_zero_channel():
            assert rgb_hex(255, 0, 128) == "#ff0080"


        def test_pads_small_channels():
            assert rgb_hex(1, 2, 3) == "#010203"
        ''',
    fix="sed -i 's/{c:x}/{c:02x}/' color.py",
    wrong="sed -i 's/{c:x}/{c:2x}/' color.py",
    statement="""`rgb_hex(255, 0, 128)` returns `'#ff080'`, which browsers reject; I expected
        `'#ff0080'`. Every channel should be two hex digits, e.g. `rgb_hex(1, 2, 3)` should
        be `'#010203'`.""",
)

task(
    "range_spec", "pagespec", "off-by-one", False,
    files={"ranges.py": r'''
        def parse_ranges(spec):
            """Page spec to page numbers: '1-3,5' -> [1, 2, 3, 5]. Ranges are inclusive."""
            out = []
            for part in spec.split(","):
                if "-" in part:
                    a, b = part.split("-")
                    out.extend(range(int(a), int(b)))
                else:
                    out.append(int(part))
            return out
        '''},
    visible=r'''
        from ranges import parse_ranges


        def test_single():
            assert parse_ranges("5") == [5]


        def test_list():
            assert parse_ranges("1,2") == [1, 2]
        ''',
    hidden=r'''
        from ranges import parse_ranges


        def test_inclusive_range():
            assert parse_ranges("1-3") == [1, 2, 3]


        def test_mixed():
            assert parse_ranges("1-3,5") == [1, 2, 3, 5]


        def test_single_element_range():
            assert parse_ranges("4-4") == [4]
        ''',
    fix="sed -i 's/int(b))/int(b) + 1)/' ranges.py",
    wrong="sed -i 's/int(a), int(b))/int(a) + 1, int(b) + 1)/' ranges.py",
    statement="""`parse_ranges('1-3,5')` returns `[1, 2, 5]`: page 3 is missing. Ranges like
        `'1-3'` are inclusive (docstring: `'1-3,5' -> [1, 2, 3, 5]`), and `'4-4'` should
        give `[4]` rather than `[]`.""",
)

task(
    "bucket_refill", "ratelimit", "state", False,
    files={"bucket.py": r'''
        class Bucket:
            """Rate limiter: at most `rate` calls are allowed per tick."""

            def __init__(self, rate):
                self.rate = rate
                self.tokens = rate
                self.tick = 0

            def allow(self, now):
                if now != self.tick:
                    self.tick = now
                    self.tokens += self.rate
                if self.tokens > 0:
                    self.tokens -= 1
                    return True
                return False
        '''},
    visible=r'''
        from bucket import Bucket


        def test_first_tick():
            b = Bucket(2)
            assert [b.allow(0) for _ in range(3)] == [True, True, False]
        ''',
    hidden=r'''
        from bucket import Bucket


        def test_idle_ticks_do_not_bank_tokens():
            b = Bucket(2)
            assert [b.allow(1) for _ in range(3)] == [True, True, False]


        def test_unused_tokens_do_not_carry_over():
            b = Bucket(2)
            b.allow(0)
            assert sum(b.allow(1) for _ in range(5)) == 2
        ''',
    fix="sed -i 's/+= self.rate/= self.rate/' bucket.py",
    wrong=("bucket.py", "self.tokens += self.rate", "self.tokens += 1"),
    statement="""`Bucket(2)` should allow 2 calls per tick, but a bucket that was idle lets more
        through: `b = Bucket(2)` followed by three `b.allow(1)` calls returns
        `[True, True, True]`. Unused tokens seem to pile up from earlier ticks; every tick
        should allow at most `rate` calls.""",
)

task(
    "template_unknown", "tinytpl", "bad-default", False,
    files={"tpl.py": r'''
        import re


        def render(template, values):
            """Fill {name} placeholders from values; unknown placeholders are left as they are."""
            return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), "")), template)
        '''},
    visible=r'''
        from tpl import render


        def test_fill():
            assert render("hi {name}", {"name": "Ada"}) == "hi Ada"


        def test_numbers():
            assert render("{a}{b}", {"a": 1, "b": 2}) == "12"
        ''',
    hidden=r'''
        from tpl import render


        def test_unknown_left_alone():
            assert render("hi {x}", {}) == "hi {x}"


        def test_mixed_known_and_unknown():
            assert render("{a} {b}", {"a": 1}) == "1 {b}"
        ''',
    fix="""sed -i 's/, "")/, m.group(0))/' tpl.py""",
    wrong="""sed -i 's/, "")/, m.group(1))/' tpl.py""",
    statement="""`render('Dear {name}, order {order_id}', {'name': 'Ada'})` returns
        `'Dear Ada, order '`: the unknown placeholder disappears. The docstring says unknown
        placeholders are left as they are, so I expected
        `'Dear Ada, order {order_id}'`.""",
)

task(
    "rotate_big_k", "rotator", "missing-case", False,
    files={"rot.py": r'''
        def rotate(xs, k):
            """Rotate xs right by k: [1, 2, 3, 4], 1 -> [4, 1, 2, 3]. k may be negative or > len(xs)."""
            if not xs:
                return []
            k = k % len(xs) if k < 0 else k
            return xs[-k:] + xs[:-k]
        '''},
    visible=r'''
        from rot import rotate


        def test_rotate_one():
            assert rotate([1, 2, 3, 4], 1) == [4, 1, 2, 3]


        def test_empty():
            assert rotate([], 3) == []


        def test_negative():
            assert rotate([1, 2, 3], -1) == [2, 3, 1]
        ''',
    hidden=r'''
        from rot import rotate


        def test_k_larger_than_length():
            assert rotate([1, 2, 3, 4], 5) == [4, 1, 2, 3]


        def test_k_several_times_length():
            assert rotate([1, 2], 5) == [2, 1]
        ''',
    fix="sed -i 's/ if k < 0 else k//' rot.py",
    wrong=("rot.py", "k = k % len(xs) if k < 0 else k", "k = k - len(xs) if k > len(xs) else k"),
    statement="""`rotate([1, 2, 3, 4], 5)` returns the list unchanged, `[1, 2, 3, 4]`.
        Rotating a 4-element list right by 5 is the same as rotating it by 1, so I expected
        `[4, 1, 2, 3]`; the docstring says k may be larger than the list. Negative k already
        works.""",
)

# --------------------------------------------------------------------------- loose tasks
# The hidden tests check only the reported example, so `wrong` (which breaks other inputs)
# still passes every hidden and visible test. The audit should flag these.

task(
    "progress_bar", "progress", "off-by-one", True,
    files={"bar.py": r'''
        def bar(done, total, width=10):
            """Text progress bar; done/total of the width is filled, rounded down.

            bar(5, 10) -> '[#####.....]'
            """
            filled = done * width // total + 1
            return "[" + "#" * filled + "." * (width - filled) + "]"


        def percent_label(done, total):
            return f"{100 * done // total}%"
        '''},
    visible=r'''
        from bar import percent_label


        def test_label():
            assert percent_label(1, 4) == "25%"
        ''',
    hidden=r'''
        from bar import bar


        def test_half_done():
            assert bar(5, 10) == "[#####.....]"
        ''',
    fix="sed -i 's/total + 1/total/' bar.py",
    wrong=("bar.py", "filled = done * width // total + 1", "filled = round(done * width / total)"),
    statement="""`bar(5, 10)` draws `'[######....]'` (six filled cells) for a job that is half
        done, and `bar(10, 10)` draws 11 cells, overflowing the bar. The docstring says the
        filled part is `done/total` of the width, rounded down.""",
)

task(
    "distance_abs", "geom", "wrong-operator", True,
    files={"geo.py": r'''
        def distance(a, b):
            """Absolute distance between two numbers on a line."""
            return abs(a + b)


        def manhattan(p, q):
            """Manhattan distance between 2D points p and q."""
            return distance(p[0], q[0]) + distance(p[1], q[1])
        '''},
    visible=r'''
        from geo import distance, manhattan


        def test_same_point():
            assert distance(0, 0) == 0
            assert manhattan((0, 0), (0, 0)) == 0
        ''',
    hidden=r'''
        from geo import distance


        def test_distance():
            assert distance(5, 3) == 2
        ''',
    fix="sed -i 's/a + b/a - b/' geo.py",
    wrong=("geo.py", "return abs(a + b)", "return a - b"),
    statement="""`distance(5, 3)` returns 8, but the distance between 5 and 3 is 2.
        `manhattan((1, 1), (4, 5))` is also wrong (11 instead of 7).""",
)

task(
    "display_name", "people-fmt", "formatting", True,
    files={"names.py": r'''
        def display_name(first, last):
            """Both names capitalised: ('ada', 'LOVELACE') -> 'Ada Lovelace'."""
            return f"{first.capitalize()} {last}"


        def initials(first, last):
            return f"{first[:1]}{last[:1]}".upper()
        '''},
    visible=r'''
        from names import initials


        def test_initials():
            assert initials("ada", "lovelace") == "AL"
        ''',
    hidden=r'''
        from names import display_name


        def test_display_name():
            assert display_name("ada", "lovelace") == "Ada Lovelace"
        ''',
    fix="sed -i 's/{last}/{last.capitalize()}/' names.py",
    wrong=("names.py", "{last}", "{last[:1].upper()}{last[1:]}"),
    statement="""`display_name('ada', 'LOVELACE')` returns `'Ada LOVELACE'`, and
        `display_name('ada', 'lovelace')` returns `'Ada lovelace'`. The docstring says both
        names are capitalised (`'Ada Lovelace'`); only the first name is.""",
)

task(
    "plural_es", "inflect-lite", "missing-case", True,
    files={"plural.py": r'''
        def plural(word, n):
            """'1 apple', '2 apples', '3 boxes': add 'es' after s, x, z, ch and sh."""
            if n == 1:
                return f"{n} {word}"
            suffix = "es" if word.endswith(("s", "x", "z")) else "s"
            return f"{n} {word}{suffix}"
        '''},
    visible=r'''
        from plural import plural


        def test_singular():
            assert plural("apple", 1) == "1 apple"


        def test_plain_plural():
            assert plural("apple", 2) == "2 apples"


        def test_x():
            assert plural("box", 3) == "3 boxes"
        ''',
    hidden=r'''
        from plural import plural


        def test_ch():
            assert plural("church", 2) == "2 churches"
        ''',
    fix="""sed -i 's/"z")/"z", "ch", "sh")/' plural.py""",
    wrong="""sed -i 's/"z")/"z", "ch")/' plural.py""",
    statement="""`plural('church', 2)` returns `'2 churchs'`. Words ending in ch or sh take
        'es' (the docstring says: add 'es' after s, x, z, ch and sh), so it should be
        `'2 churches'`; `plural('dish', 3)` gives `'3 dishs'` as well.""",
)

task(
    "order_id_pad", "orders", "formatting", True,
    files={"ids.py": r'''
        def order_id(n):
            """'ORD-' plus the number zero-padded to 6 digits: order_id(42) -> 'ORD-000042'."""
            return f"ORD-{n:05d}"


        def parse_order_id(text):
            return int(text.removeprefix("ORD-"))
        '''},
    visible=r'''
        from ids import parse_order_id


        def test_parse():
            assert parse_order_id("ORD-000042") == 42
        ''',
    hidden=r'''
        from ids import order_id


        def test_six_digits():
            assert order_id(42) == "ORD-000042"
        ''',
    fix="sed -i 's/05d/06d/' ids.py",
    wrong=("ids.py", 'f"ORD-{n:05d}"', 'f"ORD-0{n:05d}"'),
    statement="""`order_id(42)` returns `'ORD-00042'`, with only five digits. Order ids are
        supposed to be zero-padded to 6 digits (`'ORD-000042'`), and the warehouse scanner
        rejects the short ones.""",
)

task(
    "stock_floor", "stockroom", "boundary", True,
    files={"stock.py": r'''
        def stock_after(stock, sold):
            """Units left after a sale; stock never goes below zero."""
            return max(stock - sold, 1)
        '''},
    visible=r'''
        from stock import stock_after


        def test_normal_sale():
            assert stock_after(5, 3) == 2


        def test_no_sale():
            assert stock_after(10, 0) == 10
        ''',
    hidden=r'''
        from stock import stock_after


        def test_oversold():
            assert stock_after(3, 5) == 0
        ''',
    fix="sed -i 's/, 1)/, 0)/' stock.py",
    wrong=("stock.py", "return max(stock - sold, 1)", "return 0 if sold > stock else max(stock - sold, 1)"),
    statement="""After selling more units than we had, `stock_after(3, 5)` reports 1 unit left
        instead of 0. Selling exactly what we had has the same problem: `stock_after(5, 5)`
        returns 1. Stock should bottom out at zero.""",
)

task(
    "version_newer", "semverish", "logic", True,
    files={"ver.py": r'''
        def key(version):
            """'1.10.2' -> (1, 10, 2)."""
            return tuple(int(p) for p in version.split("."))


        def newer(a, b):
            """True when version a is newer than version b, e.g. newer('1.10', '1.9')."""
            return a > b
        '''},
    visible=r'''
        from ver import key, newer


        def test_key():
            assert key("1.10.2") == (1, 10, 2)


        def test_simple_newer():
            assert newer("1.2", "1.1")


        def test_equal_not_newer():
            assert not newer("1.0", "1.0")
        ''',
    hidden=r'''
        from ver import newer


        def test_two_digit_minor():
            assert newer("1.10", "1.9")
        ''',
    fix="sed -i 's/a > b/key(a) > key(b)/' ver.py",
    wrong=("ver.py", "return a > b", "return len(a) > len(b) or a > b"),
    statement="""`newer('1.10', '1.9')` returns `False`, so our updater never offers 1.10.
        Versions should be compared number by number (1.10 is newer than 1.9); right now it
        looks like a plain string comparison.""",
)

task(
    "cart_remove", "shopcart", "boundary", True,
    files={"shop/__init__.py": "", "shop/cart.py": r'''
        class Cart:
            def __init__(self):
                self.items = {}

            def add(self, sku, qty=1):
                self.items[sku] = self.items.get(sku, 0) + qty

            def remove(self, sku, qty=1):
                """Remove qty of sku; the sku is dropped entirely once its count reaches 0."""
                left = self.items.get(sku, 0) - qty
                if left < 0:
                    del self.items[sku]
                else:
                    self.items[sku] = left

            def total(self):
                return sum(self.items.values())
        '''},
    visible=r'''
        from shop.cart import Cart


        def test_add_accumulates():
            c = Cart()
            c.add("a", 2)
            c.add("a")
            assert c.items == {"a": 3}
            assert c.total() == 3


        def test_partial_remove():
            c = Cart()
            c.add("a", 3)
            c.remove("a")
            assert c.items == {"a": 2}
        ''',
    hidden=r'''
        from shop.cart import Cart


        def test_remove_all_drops_sku():
            c = Cart()
            c.add("apple", 2)
            c.remove("apple", 2)
            assert c.items == {}
        ''',
    read="cat shop/cart.py",
    fix="sed -i 's/left < 0/left <= 0/' shop/cart.py",
    wrong="sed -i 's/left < 0/left == 0/' shop/cart.py",
    statement="""After `cart.add('apple', 2)` and `cart.remove('apple', 2)`, `cart.items` is
        `{'apple': 0}`. The docstring says a SKU is dropped entirely once its count reaches
        0, so I expected `{}`; the zero-count line shows up on the checkout page.""",
)

task(
    "digit_sum", "digits", "missing-case", True,
    files={"digits.py": r'''
        def digit_sum(n):
            """Sum of the decimal digits of an int; the sign is ignored: digit_sum(-123) == 6."""
            return sum(int(c) for c in str(n))
        '''},
    visible=r'''
        from digits import digit_sum


        def test_positive():
            assert digit_sum(123) == 6


        def test_zero():
            assert digit_sum(0) == 0
        ''',
    hidden=r'''
        from digits import digit_sum


        def test_negative_single_digit():
            assert digit_sum(-5) == 5
        ''',
    fix="sed -i 's/str(n)/str(abs(n))/' digits.py",
    wrong=("digits.py", "return sum(int(c) for c in str(n))",
           "return sum(int(c) for c in str(n)) if n >= 0 else -n"),
    statement="""`digit_sum(-123)` crashes with `ValueError: invalid literal for int() with base
        10: '-'`. The docstring says the sign is ignored, so I expected 6.""",
)

task(
    "c_to_f", "thermo", "wrong-operator", True,
    files={"temp.py": r'''
        def c_to_f(c):
            """Celsius to Fahrenheit."""
            return c * 9 / 5 - 32


        def f_to_c(f):
            """Fahrenheit to Celsius."""
            return (f - 32) * 5 / 9
        '''},
    visible=r'''
        from temp import f_to_c


        def test_boiling():
            assert f_to_c(212) == 100


        def test_freezing():
            assert f_to_c(32) == 0
        ''',
    hidden=r'''
        from temp import c_to_f


        def test_freezing_point():
            assert c_to_f(0) == 32
        ''',
    fix="sed -i 's/5 - 32/5 + 32/' temp.py",
    wrong=("temp.py", "return c * 9 / 5 - 32", "return c * 5 / 9 + 32"),
    statement="""`c_to_f(100)` returns `148.0` instead of `212.0`, and `c_to_f(0)` returns
        `-32.0` instead of `32.0` (water freezes at 32 F). `f_to_c` is fine.""",
)

task(
    "truncate_ellipsis", "textwrapish", "boundary", True,
    files={"text.py": r'''
        def truncate(s, width):
            """Shorten s to at most `width` characters, ending in '...' when it was cut."""
            if len(s) <= width:
                return s
            return s[:width] + "..."
        '''},
    visible=r'''
        from text import truncate


        def test_short_unchanged():
            assert truncate("abc", 5) == "abc"


        def test_exact_fit():
            assert truncate("abcde", 5) == "abcde"
        ''',
    hidden=r'''
        from text import truncate


        def test_cut_with_ellipsis():
            assert truncate("abcdefghij", 6) == "abc..."
        ''',
    fix="sed -i 's/:width]/:width - 3]/' text.py",
    wrong=("text.py", "s[:width]", "s[:width // 2]"),
    statement="""`truncate('abcdefghij', 6)` returns `'abcdef...'`, which is 9 characters
        long. The docstring says the result is at most `width` characters including the
        `'...'`, so I expected `'abc...'`.""",
)

task(
    "unique_order", "dedupe", "logic", True,
    files={"uniq.py": r'''
        def unique(xs):
            """Remove duplicates, keeping the first occurrence of each item, in order."""
            return list(set(xs))
        '''},
    visible=r'''
        from uniq import unique


        def test_empty():
            assert unique([]) == []


        def test_all_same():
            assert unique([1, 1, 1]) == [1]
        ''',
    hidden=r'''
        from uniq import unique


        def test_keeps_first_occurrence_order():
            assert unique([3, 1, 3, 1]) == [3, 1]
        ''',
    fix="sed -i 's/set(xs)/dict.fromkeys(xs)/' uniq.py",
    wrong=("uniq.py", "return list(set(xs))", "return sorted(set(xs), reverse=True)"),
    statement="""`unique([3, 1, 3, 1])` returns `[1, 3]`; the docstring promises the first
        occurrences in their original order, i.e. `[3, 1]`. With strings the order even
        changes from run to run.""",
)

task(
    "letter_grade", "grading", "boundary", True,
    files={"grades.py": r'''
        def letter(score):
            """Letter for a (possibly fractional) score: 90 and above 'A', 80+ 'B', 70+ 'C', else 'F'."""
            if score > 90:
                return "A"
            if score >= 80:
                return "B"
            if score >= 70:
                return "C"
            return "F"
        '''},
    visible=r'''
        from grades import letter


        def test_letters():
            assert [letter(s) for s in (95, 85, 72, 10)] == ["A", "B", "C", "F"]


        def test_lower_boundaries():
            assert letter(80) == "B"
            assert letter(70) == "C"
        ''',
    hidden=r'''
        from grades import letter


        def test_ninety_is_an_a():
            assert letter(90) == "A"
        ''',
    fix="sed -i 's/score > 90/score >= 90/' grades.py",
    wrong="sed -i 's/score > 90/score > 89/' grades.py",
    statement="""A score of exactly 90 gets a `'B'`: `letter(90)` returns `'B'`, but the
        docstring says 90 and above is an `'A'`. The other boundaries (80, 70) behave
        correctly.""",
)

task(
    "email_lower", "mailparts", "formatting", True,
    files={"mail.py": r'''
        def split_email(addr):
            """'Ada@Example.COM' -> ('ada', 'example.com'): both parts are lower-cased."""
            local, domain = addr.split("@")
            return local, domain.lower()
        '''},
    visible=r'''
        from mail import split_email


        def test_plain():
            assert split_email("ada@x.org") == ("ada", "x.org")


        def test_domain_lowered():
            assert split_email("bob@EXAMPLE.com") == ("bob", "example.com")
        ''',
    hidden=r'''
        from mail import split_email


        def test_local_part_lowered():
            assert split_email("Ada@x.org") == ("ada", "x.org")
        ''',
    fix="sed -i 's/return local,/return local.lower(),/' mail.py",
    wrong=("mail.py", "return local,", "return local[:1].lower() + local[1:],"),
    statement="""`split_email('Ada@Example.COM')` returns `('Ada', 'example.com')`. The
        docstring says both parts are lower-cased, so the local part should be `'ada'`; we
        use it as a lookup key and the mixed-case version never matches.""",
)

task(
    "tags_strip", "tagger", "formatting", True,
    files={"tags.py": r'''
        def parse_tags(s):
            """'a, b ,c' -> ['a', 'b', 'c']: tags are trimmed and empty ones dropped."""
            return [t for t in map(str, s.split(",")) if t]
        '''},
    visible=r'''
        from tags import parse_tags


        def test_compact():
            assert parse_tags("a,b") == ["a", "b"]


        def test_empty():
            assert parse_tags("") == []


        def test_empty_tag_dropped():
            assert parse_tags("a,,b") == ["a", "b"]
        ''',
    hidden=r'''
        from tags import parse_tags


        def test_space_after_comma():
            assert parse_tags("a, b") == ["a", "b"]
        ''',
    fix="sed -i 's/map(str,/map(str.strip,/' tags.py",
    wrong=("tags.py", 's.split(",")', 's.replace(", ", ",").split(",")'),
    statement="""`parse_tags('python, testing')` returns `['python', ' testing']` with a
        leading space, so the tag doesn't match our existing `'testing'` tag. The docstring
        says tags are trimmed (`'a, b ,c' -> ['a', 'b', 'c']`).""",
)
