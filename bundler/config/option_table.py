"""Read layer: the option table, every option of the `bundle` command line declared once: its
flag, its help, and whether an environment variable stands in for it. A command takes an option
by its name here (bundler.cli.flags turns the entry into typer's option); an option whose help
legitimately differs between commands (`--profile` of `build` falls back on bundle.toml, that of
`audit` on the lock file) keeps each command's wording here too, beside the one flag.

The variable of an option is derived from its flag, never spelt: `--cache-dir` is
$BUNDLE_CACHE_DIR, pip's `--index-url` is pip's own $PIP_INDEX_URL (pip derives its variables
the same way). bundler.config.variables lists them with the other variables bundle reads, in
the one table docs/building.md shows. tests/test_option_table.py keeps every command's options
in this table and each variable equal to its derived name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bundler.target.profiles import DEFAULT_PROFILE

BUNDLE, PIP = "BUNDLE", "PIP"  # the prefixes of derived variables: bundle's own, pip's
ENV = "{env}"  # in a help text: the option's variable, as $NAME


def variable_name(name: str, prefix: str = BUNDLE) -> str:
    """The environment variable of the option or setting `name`: `cache-dir` -> BUNDLE_CACHE_DIR
    (a setting without a flag, such as `http-timeout`, is named the same way)."""
    return f"{prefix}_{name.upper().replace('-', '_')}"


@dataclass(frozen=True)
class Flag:
    """One option: its flag (`--link/--copy` for an on/off pair), its help, a short form, the
    placeholder of its value, its least value, and `env`, the prefix of its variable where one
    stands in for it. `wordings` holds the help a command gives it instead of `help`."""

    flag: str
    help: str
    short: str | None = None
    metavar: str | None = None
    minimum: float | None = None
    env: str | None = None
    wordings: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The table's key: the flag without its dashes (`--link/--copy` -> link)."""
        return self.flag.split("/")[0].removeprefix("--")

    @property
    def variable(self) -> str | None:
        """The environment variable that stands in for the option, derived from its name."""
        return variable_name(self.name, self.env) if self.env else None

    def wording(self, command: str | None = None) -> str:
        """The help `command`'s wording gives (None: the option's own help), its variable
        named where the text says {env}."""
        text = self.help if command is None else self.wordings[command]
        return text.replace(ENV, f"${self.variable}") if self.variable else text


def table(*flags: Flag) -> dict[str, Flag]:
    """The flags by name; a flag declared twice is refused (a test plants one)."""
    named: dict[str, Flag] = {}
    for flag in flags:
        if flag.name in named:
            raise ValueError(f"the option {flag.flag} is declared twice in the option table")
        named[flag.name] = flag
    return named


OPTIONS = table(
    # General options, taken by every command they apply to.
    Flag("--debug", "Show tracebacks for errors.", env=BUNDLE),
    Flag("--version", "Show the version."),
    Flag(
        "--json",
        "Print the result as JSON.",
        wordings={
            "findings": "Print the findings as JSON.",
            "root": "The command's result, or its error, as JSON: the same as the command's "
            "--json.",
        },
    ),
    Flag(
        "--dry-run",
        "Say what the command would do and its settings, each with where it came from (its "
        "flag, an environment variable such as $BUNDLE_CACHE_DIR, or the default); do nothing: "
        "no download, nothing written.",
        wordings={
            "build": "Show the plan and write nothing into the output folder. It still downloads "
            "and verifies the profile's artifacts into the cache, unless they are cached "
            "(1.5-2.5 GB for a GPU profile); with --offline it works from the cache (and --mirror "
            "folders) only and names every artifact that is missing."
        },
    ),
    Flag("--cache-dir", f"Download cache (default: {ENV} or the user cache).", env=BUNDLE),
    Flag(
        "--profile",
        "Target profile: a name, a profile .toml file, or an ORT release (its GPU profile).",
        short="-p",
        wordings={
            "build": "Target profile: a name, a .toml file, or an ORT release (default: "
            f"bundle.toml's [build] profile, else {DEFAULT_PROFILE}).",
            "audit": "Target profile (default: the lock file's).",
            "scan": "Take the GPU driver DLL names from this profile (default: "
            f"{DEFAULT_PROFILE}).",
            "measure": "Instead of --ort: the bundle's profile (its ORT release; its cuDNN "
            "version is checked against the one the models load).",
        },
    ),
    Flag(
        "--ort",
        "An ORT release, e.g. 1.31.1: its shipped GPU profile.",
        wordings={
            "measure": "The ORT release the bundle ships, e.g. 1.31.1.",
            "new": "The ORT release, e.g. 1.31.1, or latest.",
        },
    ),
    Flag("--search", "Folder to search for DLLs (repeatable, in order).", short="-s"),
    Flag(
        "--config",
        "bundle.toml holding the render table.",
        wordings={
            "build": "bundle.toml to read (default: beside EXE).",
            "publish": "bundle.toml holding the [publish] table (default: the current "
            "folder's, else the one beside DIST).",
        },
    ),
    Flag("--force", "Overwrite files bundle did not write."),
    Flag(
        "--link/--copy",
        "Hard-link files from the cache, or copy them.",
        wordings={
            "build": "Hard-link files from the cache, or copy them (default: bundle.toml's "
            "[build] link, else --copy)."
        },
    ),
    Flag(
        "--out",
        "Output folder (default: the exe's folder).",
        wordings={
            "iss": "Where to write the script (default: beside the lock file).",
            "postbuild": "The folder for both files (default: the lock file's).",
            "msbuild": "The folder to lay out (default: ./ort-bundle).",
            "evidence": "The app evidence file to write (JSON).",
            "profile": "Write the profile here (default: stdout).",
            "release": "The release folder (default: DIST/release).",
        },
    ),
    Flag(
        "--lock",
        "The bundle's lock file, or its folder (default: from bundle.toml, or ./).",
        wordings={"verify": "The lock, or the bundle's .zip/.7z holding it."},
    ),
    # Where archives come from (bundler.cli.groups.Sources), and the package index.
    Flag("--source", "auto (url, then pip, then dir), url, pip or dir."),
    Flag("--mirror", "Folder or URL holding the archives by name (repeatable)."),
    Flag("--offline", "No network: cache, mirror folders, local installs."),
    Flag("--allow-http", "Allow plain-http:// mirrors."),
    Flag("--index-url", f"PEP 691 package index (default: {ENV} or PyPI).", env=PIP),
    # build: what it ships and writes.
    Flag(
        "--model",
        "An ONNX model the app runs (repeatable): leave out the run-time-loaded libraries "
        "(cuDNN sub-libraries, cuFFT, NVRTC) its ops never load (docs/pruning.md; needs "
        "ort-bundle[models]).",
    ),
    Flag(
        "--evidence",
        "With --model: the app's own measurement (bundle measure) instead of the shipped per-op "
        "table; refused when a model, the ORT release or cuDNN differ.",
    ),
    Flag(
        "--ep",
        "An execution-provider pack to ship in ep/PACK/ beside the exe (repeatable): "
        "nv-tensorrt-rtx, openvino or webgpu (docs/ep-packs.md).",
        metavar="PACK",
    ),
    Flag("--iss", "Write the Inno Setup script here (default: OUT/setup.iss)."),
    Flag("--no-iss", "Write no Inno Setup script."),
    Flag("--no-postbuild", "Write no postbuild.cmd / postbuild.event.xml."),
    Flag(
        "--sbom/--no-sbom",
        "Write a CycloneDX SBOM (default: bundle.toml's [build] sbom, else --no-sbom).",
    ),
    Flag(
        "--archive",
        "Also pack the bundle into this .zip or .7z file.",
        wordings={"publish": "An archive to publish besides DIST's .zip/.7z."},
    ),
    Flag("--no-doctor", "Ship no bundle-doctor.exe (the check on the target)."),
    Flag("--vc-runtime", "app-local (default) or installer (vc_redist)."),
    Flag("--vc-redist", "vc_redist.x64.exe for installer mode."),
    Flag("--clean", "First remove the files an earlier build wrote."),
    Flag("--locked", "Fail if the result differs from bundle.lock.json."),
    # The installer (setup.iss) of build and render iss.
    Flag("--app-name", "The app's name (default: the exe's name)."),
    Flag("--app-version", "The version (default: the exe's FileVersion)."),
    Flag("--publisher", "The publisher's name."),
    Flag("--iss-compression", "Inno Setup compression (default lzma2/normal; zip/1 fast)."),
    Flag("--shortcut/--no-shortcut", "A Start-menu shortcut to the app."),
    Flag(
        "--require-gpu/--allow-cpu", "A silent install fails without a good enough NVIDIA driver."
    ),
    Flag(
        "--runtime-pack/--no-runtime-pack",
        "The runtime as a setup of its own, compiled once per runtime (docs/runtime-pack.md).",
    ),
    Flag(
        "--pack-url",
        "Also write setup-web.iss, which downloads the runtime pack from this https:// folder.",
        metavar="URL",
    ),
    Flag(
        "--pack-part-mb",
        "The runtime pack's setup in parts of this many MB (default 100): a broken download "
        "resumes at the first part it lacks.",
        metavar="MB",
    ),
    Flag(
        "--require-ep",
        "The setup stops where the doctor finds no device for this --ep pack (repeatable).",
        metavar="PACK",
    ),
    # render postbuild.
    Flag("--project-dir", "The .vcxproj's folder: the event names the script from it."),
    # audit.
    Flag("--strict", "Warnings fail the audit too (exit 18)."),
    Flag(
        "--ignore",
        "Suppress a finding code (or name), optionally only for files matching a pattern, e.g. "
        "BA303:onnxruntime_providers_tensorrt.dll. Repeatable.",
        metavar="CODE[:FILE]",
    ),
    Flag("--junit", "Also write a JUnit XML report (one case per finding code)."),
    Flag("--html", "Also write a self-contained HTML report with the graph."),
    Flag("--run", "Load proof: start the app (under Wine off Windows) too."),
    Flag("--signatures", "Also verify the DLLs' Authenticode signatures."),
    Flag(
        "--trust",
        "With --signatures: signers must be issued by these root CAs (a PEM file) instead of "
        "only verifying; PATH may then also be one signed .exe or .dll, such as a setup.exe or "
        "unins000.exe.",
        metavar="CA.pem",
    ),
    Flag("--run-arg", "An argument for the app with --run.", metavar="ARG"),
    Flag("--explain", "Why DLL would fail to load (error 126).", metavar="DLL"),
    Flag(
        "--verify",
        "Hash every file the lock file lists (without it, sizes and time stamps are compared; "
        "PATH being the lock file implies it).",
        wordings={"fetch": "Re-hash cached files too."},
    ),
    # deps, scan, fetch, cache.
    Flag("--why", "Print every chain from a root to this DLL."),
    Flag(
        "--all",
        "Show system DLLs and API sets in the tree too.",
        wordings={"clean": "Also remove the verified archives and the compiled runtime packs."},
    ),
    Flag("--fetch", "Also search the profile's artifacts (fetched if needed)."),
    Flag(
        "--pool",
        "Also match names against the DLLs in DIR (default: the DLLs' own folders).",
        metavar="DIR",
    ),
    Flag("--to", "Also put every archive here (a mirror for offline agents)."),
    # profiles new.
    Flag(
        "--flavour",
        "gpu (the GPU flavour of the CUDA major the wheel states), gpu-cuda12, gpu-cuda13, cpu, "
        "directml, windowsml-directml, or a flavour .toml.",
    ),
    Flag(
        "--components",
        "The flavour's component set (default: the first that fits the wheel's CUDA build, "
        "preferring the flavour's default).",
    ),
    # measure: how each model runs.
    Flag(
        "--libs",
        "The folder holding the profile's CUDA and cuDNN libraries, searched first (Windows: "
        "the built bundle folder; Linux: a folder of libcudnn*.so.9, libcudart.so.13, ...).",
    ),
    Flag("--provider", "The execution provider to measure on."),
    Flag(
        "--cuda-option",
        "A CUDA provider option, as the app sets it (repeatable), e.g. device_id=0.",
        metavar="KEY=VALUE",
    ),
    Flag(
        "--dim",
        "The size of a named dynamic dimension (repeatable; default 1).",
        metavar="NAME=N",
    ),
    Flag("--timeout", "Seconds each model may take.", minimum=1),
    # publish and verify.
    Flag("--setups", "The compiled setups' folder (default: DIST/Output)."),
    Flag("--package-id", "winget PackageIdentifier; without one, no winget manifests."),
    Flag("--license", "winget License."),
    Flag("--short-description", "winget ShortDescription."),
    Flag("--url", "InstallerUrl template: {name} the setup's file name, {version} its version."),
    Flag("--winget-setup", "The setup winget installs (default: setup.iss's)."),
    Flag("--builder-id", "The provenance's builder id (a URI: your CI workflow)."),
    Flag("--sums", "SHA256SUMS (default: beside the first file)."),
    Flag("--statement", "The provenance statement (default: beside SHA256SUMS)."),
)
