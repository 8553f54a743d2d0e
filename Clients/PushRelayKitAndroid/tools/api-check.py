#!/usr/bin/env python3
"""Checks compiled classes against the public Android API surface.

Usage: api-check.py [--stubs DIR] [--cache FILE] CLASSES...
  CLASSES  directories or jars of .class files: the library. Whatever they reference outside
           themselves must be public Android API: the class in the API 36 stubs of the PyPI
           package chaquopy-stubs-android (java.*, javax.*, org.*, android.*, dalvik.*), a member
           by name in it or its bases (methods also by parameter count), and nothing on the deny
           list (in API 36 but not at minSdk 21).
  --stubs  the folder holding java-stubs/, javax-stubs/, … (default: the installed package's)
  --cache  the parsed surface, JSON (default: .build-android/tools/api-surface.json in the
           repository); rebuilt when the stubs' version or this parser changes
Prints one line per violation and a summary; exits 1 on any violation, 2 on a usage error.

Why: javac --release 7 and dx resolve nothing against Android, so a JDK-only call
(java.lang.management, com.sun.*) or a hidden one (org.json JSONObject.keySet()) compiles and
dexes, then fails at run time on a device.
"""
import argparse
import json
import os
import re
import struct
import sys
import zipfile

PARSER_VERSION = 1  # bump when the parsed form changes, so old caches are rebuilt
STUB_PACKAGES = ("java", "javax", "org", "android", "dalvik")
DIST = "chaquopy-stubs-android"

# In the API 36 stubs but not at minSdk 21 (the API level each arrived in). Java 7 API, so
# javac --release 7 accepts them, or Java 8 API (refused by --release 7; listed for other inputs).
# A prefix of a binary name, or OWNER.MEMBER.
DENY = {
    "java/nio/file/": 26,
    "java/lang/invoke/": 26,
    "java/nio/channels/Asynchronous": 26,
    "java/nio/channels/SeekableByteChannel": 24,
    "java/nio/channels/NetworkChannel": 24,
    "java/nio/channels/MulticastChannel": 24,
    "java/nio/channels/FileChannel.open": 24,
    "java/net/StandardSocketOptions": 24,
    "java/net/StandardProtocolFamily": 24,
    "java/lang/ProcessBuilder$Redirect": 26,
    "java/lang/Character$UnicodeScript": 24,
    "java/lang/ClassValue": 34,
    "java/util/Locale$Category": 24,
    "java/util/concurrent/CompletableFuture": 24,
    "java/util/concurrent/Flow": 30,
    "java/util/function/": 24,
    "java/util/stream/": 24,
    "java/util/Optional": 24,
    "java/util/Base64": 26,
    "java/time/": 26,
}
# Compile-only annotations: in the class files, never shipped, never loaded.
EXCLUDED = ("androidx/annotation/",)


def fail(message):
    print("api-check: " + message, file=sys.stderr)
    sys.exit(2)


# --- The stubs ------------------------------------------------------------------------------------

def find_stubs():
    """The folder holding java-stubs/ etc. and the package's version (None if unknown)."""
    try:
        from importlib import metadata
        dist = metadata.distribution(DIST)
        return str(dist.locate_file("")), dist.version
    except Exception:
        pass
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "java-stubs")):
            return entry, None
    return None, None


def stubs_version(folder):
    for name in sorted(os.listdir(folder)):
        m = re.match(r"chaquopy_stubs_android-(.+)\.dist-info$", name)
        if m:
            return m.group(1)
    return None


def split_top(text):
    """Splits at commas outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def paren_group(text):
    """The text inside the first balanced (…) of text, and what follows it."""
    start = text.index("(")
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i], text[i + 1:]
    raise ValueError("unbalanced: " + text)


def parse_stub_file(path, module, classes):
    """Adds the classes of one .pyi module: {binary name: [raw bases, module, methods, fields]}."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    stack = []  # (indent, binary name) of the enclosing classes
    static = False
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if text.startswith("@"):
            static = static or text == "@staticmethod"
            continue
        if text.startswith(("class ", "def ")):
            while text.count("(") > text.count(")") and i < len(lines):  # a def over lines
                text += " " + lines[i].strip()
                i += 1
        owner = stack[-1][1] if stack else None
        if text.startswith("class "):
            m = re.match(r"class (\w+)\s*(\(.*\))?\s*:", text)
            name = (owner + "$" if owner else module.replace(".", "/") + "/") + m.group(1)
            bases = split_top(paren_group(m.group(2))[0]) if m.group(2) else []
            classes[name] = [bases, module, {}, []]
            stack.append((indent, name))
        elif text.startswith("def ") and owner:
            name = re.match(r"def (\w+)", text).group(1)
            params = [p.split(":")[0].split("=")[0].strip() for p in split_top(paren_group(text)[0])]
            params = [p for p in params if p not in ("/", "*")]  # markers, not parameters
            if not static and params[:1] == ["self"]:
                params = params[1:]
            if name == "__init__":
                name = "<init>"
            elif name.startswith("__"):  # Python protocol methods the stub generator adds
                static = False
                continue
            arities = classes[owner][2].setdefault(name, [])
            if len(params) not in arities:
                arities.append(len(params))
        elif owner:
            m = re.match(r"(\w+)\s*:", text)  # NAME: type = ... (static or instance field)
            if m:
                classes[owner][3].append(m.group(1))
        static = False


def resolve_base(base, module, modules):
    """A base as written in a stub (java.lang.Object, Character.Subset, Enum[E]) as a binary name."""
    base = base.split("[", 1)[0].strip()
    if not base or base.startswith(("typing.", "java.chaquopy.", "builtins.")):
        return None
    parts = base.split(".")
    for k in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in modules:
            return prefix.replace(".", "/") + "/" + "$".join(parts[k:])
    return module.replace(".", "/") + "/" + "$".join(parts)


def parse_stubs(folder):
    classes = {}
    for package in STUB_PACKAGES:
        root = os.path.join(folder, package + "-stubs")
        for directory, _, files in os.walk(root):
            for file in files:
                if not file.endswith(".pyi"):
                    continue
                rel = os.path.relpath(os.path.join(directory, file), root)[:-len(".pyi")].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                if package == "java" and rel[:1] in (["chaquopy"], ["primitive"]):
                    continue  # the Python bridge's own helpers, not Java classes
                parse_stub_file(os.path.join(directory, file), ".".join([package] + rel), classes)
    modules = {entry[1] for entry in classes.values()}
    surface = {}
    for name, (bases, module, methods, fields) in classes.items():
        resolved = [resolve_base(b, module, modules) for b in bases]
        surface[name] = [[b for b in resolved if b and b != name], methods, sorted(set(fields))]
    return surface


def load_surface(folder, cache):
    version = stubs_version(folder)
    key = "%d %s %s" % (PARSER_VERSION, os.path.realpath(folder), version)
    if version is None:  # no version to key on: the files' sizes and times instead
        stats = [os.stat(os.path.join(d, f)) for p in STUB_PACKAGES
                 for d, _, fs in os.walk(os.path.join(folder, p + "-stubs")) for f in fs]
        key += " %d %d" % (sum(s.st_size for s in stats), max((s.st_mtime_ns for s in stats), default=0))
    try:
        with open(cache, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("key") == key:
            return data["classes"], version
    except (OSError, ValueError):
        pass
    surface = parse_stubs(folder)
    if not surface:
        fail("no stubs under %s" % folder)
    os.makedirs(os.path.dirname(os.path.abspath(cache)), exist_ok=True)
    tmp = "%s.%d" % (cache, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"key": key, "classes": surface}, f, separators=(",", ":"))
    os.replace(tmp, cache)  # whole, so a concurrent run reads the old or the new one
    return surface, version


# --- Class files ----------------------------------------------------------------------------------

class ClassFile:
    """The parts of a class file the check needs: its name, super, interfaces, declared members
    and the constant pool's class and member references."""

    def __init__(self, data, origin):
        if data[:4] != b"\xca\xfe\xba\xbe":
            raise ValueError("%s: not a class file" % origin)
        u2 = lambda p: struct.unpack_from(">H", data, p)[0]
        self.major = u2(6)
        count, pos, cp = u2(8), 10, {}
        index = 1
        while index < count:
            tag = data[pos]
            if tag == 1:  # Utf8 (modified UTF-8; names here are plain)
                n = u2(pos + 1)
                cp[index] = (1, data[pos + 3:pos + 3 + n].decode("utf-8", "replace"))
                pos += 3 + n
            elif tag in (3, 4):  # Integer, Float
                pos += 5
            elif tag in (5, 6):  # Long, Double: two slots
                pos += 9
                index += 1
            elif tag in (7, 8, 16, 19, 20):  # Class, String, MethodType, Module, Package
                cp[index] = (tag, u2(pos + 1))
                pos += 3
            elif tag in (9, 10, 11, 12, 17, 18):  # member refs, NameAndType, (Invoke)Dynamic
                cp[index] = (tag, u2(pos + 1), u2(pos + 3))
                pos += 5
            elif tag == 15:  # MethodHandle
                cp[index] = (tag, data[pos + 1], u2(pos + 2))
                pos += 4
            else:
                raise ValueError("%s: constant pool tag %d at %d" % (origin, tag, pos))
            index += 1
        utf = lambda i: cp[i][1]
        cls = lambda i: utf(cp[i][1])
        self.name = cls(u2(pos + 2))
        self.super = cls(u2(pos + 4)) if u2(pos + 4) else None
        n = u2(pos + 6)
        self.interfaces = [cls(u2(pos + 8 + 2 * k)) for k in range(n)]
        pos += 8 + 2 * n
        self.members = set()  # (name, descriptor) declared here
        for _ in range(2):  # fields, then methods
            n, pos = u2(pos), pos + 2
            for _ in range(n):
                self.members.add((utf(u2(pos + 2)), utf(u2(pos + 4))))
                attributes, pos = u2(pos + 6), pos + 8
                for _ in range(attributes):
                    pos += 6 + struct.unpack_from(">I", data, pos + 2)[0]
        self.classes, self.refs, self.dynamic = [], [], []
        for tag, *rest in cp.values():
            if tag == 7:
                self.classes.append(utf(rest[0]))
            elif tag in (9, 10, 11):
                _, name, descriptor = cp[rest[1]]
                self.refs.append(("field" if tag == 9 else "method", cls(rest[0]), utf(name), utf(descriptor)))
            elif tag == 18:
                self.dynamic.append(utf(cp[rest[1]][1]))


def read_classes(paths):
    for path in paths:
        if os.path.isdir(path):
            for directory, _, files in sorted(os.walk(path)):
                for file in sorted(files):
                    if file.endswith(".class") and file != "module-info.class":
                        full = os.path.join(directory, file)
                        with open(full, "rb") as f:
                            yield ClassFile(f.read(), full)
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for entry in sorted(z.namelist()):
                    if entry.endswith(".class") and not entry.endswith("module-info.class") \
                            and not entry.startswith("META-INF/"):
                        yield ClassFile(z.read(entry), path + "!" + entry)
        elif path.endswith(".class"):
            with open(path, "rb") as f:
                yield ClassFile(f.read(), path)
        else:
            fail("%s is not a directory, jar or class file" % path)


def descriptor_types(descriptor):
    """The class names in a field or method descriptor."""
    return re.findall(r"L([^;]+);", descriptor)


def arity(descriptor):
    params = descriptor[1:descriptor.index(")")]
    return len(re.findall(r"\[*(?:L[^;]+;|[BCDFIJSZ])", params))


def element(name):
    """An array class's element class (None for a primitive one); other names as they are."""
    if not name.startswith("["):
        return name
    name = name.lstrip("[")
    return name[1:-1] if name.startswith("L") else None


# --- The check ------------------------------------------------------------------------------------

class Checker:
    def __init__(self, surface, own, api):
        self.surface, self.own, self.api = surface, own, api
        self.missing = "which is not in the Android API %s surface" % api

    def ancestors(self, name):
        """name, its bases and interfaces, transitively (stub and own classes), then Object."""
        seen, queue = [], [name]
        while queue:
            c = queue.pop(0)
            if c in seen:
                continue
            seen.append(c)
            if c in self.own:
                queue += [b for b in [self.own[c].super] + self.own[c].interfaces if b]
            elif c in self.surface:
                queue += self.surface[c][0]
        return seen + ([] if "java/lang/Object" in seen else ["java/lang/Object"])

    def stub_has(self, c, kind, name, descriptor):
        if c not in self.surface:
            return False
        _, methods, fields = self.surface[c]
        if kind == "field":
            return name in fields or name + "_" in fields  # Python keywords get a trailing _
        n = arity(descriptor)
        arities = methods.get(name, []) + methods.get(name + "_", [])
        # A constructor of a non-static nested class takes the outer instance first in the JVM.
        return n in arities or (name == "<init>" and "$" in c and n - 1 in arities)

    def has_member(self, owner, kind, name, descriptor):
        if name == "<init>":  # constructors are not inherited
            return (name, descriptor) in self.own[owner].members if owner in self.own \
                else self.stub_has(owner, kind, name, descriptor)
        chain = self.ancestors(owner)
        if name in ("values", "valueOf") and kind == "method" and "java/lang/Enum" in chain:
            return True  # every enum has them; javac makes them
        for c in chain:
            if c in self.own:
                if any(m[0] == name and (kind == "field") == (not m[1].startswith("("))
                       for m in self.own[c].members):
                    return True
            elif self.stub_has(c, kind, name, descriptor):
                return True
        return False

    def type_problem(self, name):
        """Why a referenced class cannot be used (None if it can, or it is the library's own)."""
        name = element(name)
        if name is None or name in self.own or name.startswith(EXCLUDED):
            return None
        for entry, level in DENY.items():
            if "." not in entry and name.startswith(entry):
                return "which is not available at minSdk 21 (API %d)" % level
        return None if name in self.surface else self.missing

    def check(self, cf):
        problems, covered = {}, set()  # covered: classes a member line already names
        for kind, owner, name, descriptor in cf.refs:
            types = [owner]
            if element(owner) not in self.own:  # own members' types: checked with the declarations
                types += descriptor_types(descriptor)
            problem = next((p for p in map(self.type_problem, types) if p), None)
            if problem is None and owner.startswith("["):
                if element(owner) in self.own or element(owner) is None or name == "clone":
                    continue
                owner = "java/lang/Object"  # an array's other members are Object's
            if problem is None and owner + "." + name in DENY:
                problem = "which is not available at minSdk 21 (API %d)" % DENY[owner + "." + name]
            if problem is None and not owner.startswith(EXCLUDED) and \
                    not self.has_member(owner, kind, name, descriptor):
                problem = self.missing
                if owner in self.own:  # inherited: name the API class it would come from
                    owner = next(c for c in self.ancestors(owner) if c not in self.own)
            if problem:
                separator = "" if kind == "method" else ":"
                problems["%s.%s%s%s" % (java_name(element(owner) or owner), name, separator, descriptor)] = problem
                covered.update(element(t) for t in types)
        # Classes used with no member reference: casts, instanceof, catch, super, declarations.
        for name in cf.classes + [t for _, d in cf.members for t in descriptor_types(d)]:
            problem = self.type_problem(name)
            if problem and element(name) not in covered:
                problems[java_name(element(name))] = problem
        for name in cf.dynamic:
            problems["invokedynamic " + name] = "which is not available at minSdk 21 (dx refuses it)"
        return ["%s: references %s %s" % (java_name(cf.name), t, p) for t, p in sorted(problems.items())]


def java_name(name):
    return name.replace("/", ".")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.normpath(os.path.join(here, "..", "..", ".."))
    parser = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1].split("\n")[0][len("Usage: "):])
    parser.add_argument("--stubs")
    parser.add_argument("--cache", default=os.path.join(repo, ".build-android", "tools", "api-surface.json"))
    parser.add_argument("classes", nargs="+")
    args = parser.parse_args()
    folder, version = (args.stubs, None) if args.stubs else find_stubs()
    if not folder or not os.path.isdir(os.path.join(folder, "java-stubs")):
        fail("no java-stubs/ found (pip install %s, or --stubs DIR)" % DIST)
    surface, version = load_surface(folder, args.cache)
    api = (version or "36").split(".")[0]
    try:
        files = list(read_classes(args.classes))
    except (ValueError, IndexError, KeyError, struct.error, zipfile.BadZipFile) as error:
        fail("cannot read the classes: %s" % error)
    own = {cf.name: cf for cf in files}
    checker = Checker(surface, own, api)
    violations = [line for cf in files for line in checker.check(cf)]
    for line in violations:
        print(line)
    print("api-check: %d classes, %d references checked against the Android API %s surface (%s %s), minSdk 21: "
          "%d violations" % (len(files), sum(len(cf.refs) + len(cf.classes) for cf in files), api, DIST,
                             version or "unknown version", len(violations)))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
