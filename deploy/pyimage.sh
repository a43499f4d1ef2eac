#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Builds the Python sandbox image wmrl-python:<hash> and prints its tag on
# stdout. The image is never pulled: it is a Debian root filesystem made here
# with debootstrap (--variant=minbase) from the machine's configured Debian
# mirror, holding python3, numpy, pandas and scikit-learn from Debian's own
# packages, imported into Docker with `docker import`.
#
# The tag is the first 16 hex digits of the SHA-256 of the inputs: this
# script, deploy/lib/debian.sh, the package list, the mirror and suite, and
# the version of every package in the dependency closure in that suite, as
# the machine's apt lists give it. When that tag already exists the script
# only prints it (a no-op; no network, a few seconds). Otherwise it runs
# apt-get update first (so the versions hashed are the mirror's), builds,
# and checks that debootstrap installed exactly the versions hashed
# (build_image of deploy/lib/debian.sh; finish_root below is what is this
# image's own). The list of installed packages is kept in the image as
# /etc/wmrl-packages.
#
# What the image leaves out: the C/C++ toolchain and Boost headers Debian's
# scipy drags in through python3-pythran (a solution has no compiler), the
# Python packages' test suites, docs, and the datasets scikit-learn bundles
# (the real tasks of deploy/pytasks are made from them: a solution must not
# look its test answers up). About 340 MB; the first build takes 4-7 minutes.
#
# The image's default user is nobody (65534:65534) and its working directory
# /work; the sandbox that runs solutions in it (read-only root, tmpfs /work,
# no network) sets those again and does not rely on them.
#
# Usage: deploy/pyimage.sh          (prints wmrl-python:<hash>)
# Needs root (or sudo) for debootstrap and apt-get; the build directory is
# $WMRL_CACHE/pyimage (default ~/.cache/wmrl/pyimage) and is removed after.
set -euo pipefail

# shellcheck disable=SC2034 # LOG_PREFIX is debian.sh's
LOG_PREFIX=pyimage.sh
# shellcheck source=lib/debian.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian.sh"

# Debian's python3-scipy depends on python3-pythran, which pulls in a C++
# toolchain and the Boost headers (about 500 MB) that nothing imports at run
# time (scipy mentions pythran only in comments). They are removed, with
# the -dev packages that came along, ignoring the dependency; a solution
# has no compiler.
BUILD_ONLY=(python3-pythran python3-beniget python3-gast python3-ply
	libboost-dev libboost1.74-dev libxsimd-dev
	g++ g++-12 gcc gcc-12 cpp cpp-12 libgcc-12-dev libstdc++-12-dev
	libasan8 libtsan2 liblsan0 libubsan1 libitm1 libcc1-0 libisl23 libmpc3 libmpfr6
	binutils binutils-common binutils-x86-64-linux-gnu libbinutils libctf0 libctf-nobfd0 libgprofng0 libjansson4
	libc6-dev libc-dev-bin linux-libc-dev libcrypt-dev libnsl-dev libtirpc-dev rpcsvc-proto
	libexpat1-dev zlib1g-dev libopenblas-dev libopenblas-pthread-dev
	libpython3-all-dev libpython3-dev libpython3.11-dev python3-all-dev python3-dev python3.11-dev
	libjs-jquery libjs-sphinxdoc libjs-underscore)

# finish_root ROOT removes from the debootstrapped ROOT what the image leaves
# out, checks that Python can do what the image is for, and prints the
# image's docker import instructions (build_image's hook).
finish_root() {
	local root=$1 installed p purge=()
	# shellcheck disable=SC2016 # dpkg-query's format
	installed=$(as_root chroot "$root" dpkg-query -W -f '${Package}\n')
	for p in "${BUILD_ONLY[@]}"; do
		grep -qx "$p" <<<"$installed" && purge+=("$p")
	done
	if [ ${#purge[@]} -gt 0 ]; then
		as_root chroot "$root" dpkg --purge --force-depends "${purge[@]}" >&2
	fi

	# No test suites of the Python packages (about 90 MB; nothing imports
	# them). The byte code Debian compiled at install stays: the root is
	# read-only at run time, and imports are faster with it.
	as_root find "$root/usr/lib/python3/dist-packages" -depth -type d -name tests -exec rm -rf {} +
	# Nor the datasets scikit-learn bundles: wmrl's real tasks are made from
	# them (deploy/pytasks), and a solution must not look its test answers up.
	as_root rm -rf "$root/usr/lib/python3/dist-packages/sklearn/datasets/data" \
		"$root/usr/lib/python3/dist-packages/sklearn/datasets/descr" \
		"$root/usr/lib/python3/dist-packages/sklearn/datasets/images"
	as_root mkdir -p "$root/work"
	as_root chmod 1777 "$root/work"

	# A check that the image can do what it is for.
	as_root chroot "$root" /usr/bin/python3 -B -c '
import sys, numpy, pandas, scipy, sklearn
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
X, y = make_classification(n_samples=300, n_features=8, n_informative=4, n_classes=3, random_state=0)
for m in (LogisticRegression(max_iter=1000), RandomForestClassifier(n_estimators=20, random_state=0), HistGradientBoostingClassifier(max_iter=20)):
    assert m.fit(X, y).score(X, y) > 0.7, m
pandas.DataFrame(X).describe()
print("python3", sys.version.split()[0], "numpy", numpy.__version__, "pandas", pandas.__version__, "scipy", scipy.__version__, "sklearn", sklearn.__version__)
' >&2

	echo 'USER 65534:65534'
	echo 'WORKDIR /work'
	echo 'ENV PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8'
	echo 'CMD ["/usr/bin/python3"]'
}

build_image wmrl-python finish_root python3 python3-numpy python3-pandas python3-sklearn
