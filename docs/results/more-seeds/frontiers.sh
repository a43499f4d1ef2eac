#!/bin/sh
# frontiers.sh: the control and the four difference variants on four suites,
# pooled over every seed measured (seeds 1-16 on every suite), paired by seed with the control and with
# grpo (seeds 1-5), through `wmrl bench frontier`. Run from this directory:
#   WMRL=../../../bin/wmrl sh frontiers.sh
set -e
W=${WMRL:-wmrl}
D=../difference M=../memory
$W bench frontier --out s0 --anchor control grpo=../five-seeds:grpo \
  control=../five-seeds:anchor control=anchor-s20260829-6-12 control=anchor-s20260829-13-16 \
  'frozen + difference'=$D/fz-s0 'frozen + difference'=fz-s20260829-6-12 'frozen + difference'=fz-s20260829-13-16 \
  'v2 + difference'=$D/v2-s0 'v2 + difference'=v2-s20260829-6-12 'v2 + difference'=v2-s20260829-13-16 \
  'frozen + difference + memory'=$M/f-s20260829 'frozen + difference + memory'=fzm-s20260829-6-12 'frozen + difference + memory'=fzm-s20260829-13-16 \
  'v2 + difference + memory'=$M/m-s20260829 'v2 + difference + memory'=v2m-s20260829-6-12 'v2 + difference + memory'=v2m-s20260829-13-16
$W bench frontier --out s7 --anchor control grpo=../suite-seed-7:grpo \
  control=../suite-seed-7:anchor control=anchor-s7-6-12 control=anchor-s7-13-16 \
  'frozen + difference'=$D/fz-s7 'frozen + difference'=fz-s7-6-12 'frozen + difference'=fz-s7-13-16 \
  'v2 + difference'=$D/v2-s7 'v2 + difference'=v2-s7-6-12 'v2 + difference'=v2-s7-13-16 \
  'frozen + difference + memory'=$M/f-s7 'frozen + difference + memory'=fzm-s7-6-12 'frozen + difference + memory'=fzm-s7-13-16 \
  'v2 + difference + memory'=$M/m-s7 'v2 + difference + memory'=v2m-s7-6-12 'v2 + difference + memory'=v2m-s7-13-16
$W bench frontier --out s11 --anchor control grpo=../no-harm/g11:grpo \
  control=../no-harm/g11:anchor control=$D/s11x/anchor:anchor control=$M/control-s11-9-16 \
  'frozen + difference'=$D/suite11-8seeds/fz-results.json:wmrl 'frozen + difference'=$M/fz-s11-9-16 \
  'v2 + difference'=$D/suite11-8seeds/v2-results.json:wmrl 'v2 + difference'=$M/v2-s11-9-16 \
  'frozen + difference + memory'=$M/f-s11 'frozen + difference + memory'=$M/f-s11-6-16 \
  'v2 + difference + memory'=$M/m-s11 'v2 + difference + memory'=$M/m-s11-6-16
$W bench frontier --out s13 --anchor control grpo=../four-suites/g13:grpo \
  control=../four-suites/g13:anchor control=$D/s13x/anchor:anchor control=$M/control-s13-9-16 \
  'frozen + difference'=$D/fz-s13 'frozen + difference'=$D/s13x/fz:wmrl 'frozen + difference'=$M/fz-s13-9-16 \
  'v2 + difference'=$D/v2-s13 'v2 + difference'=$D/s13x/v2:wmrl 'v2 + difference'=$M/v2-s13-9-16 \
  'frozen + difference + memory'=$M/f-s13 'frozen + difference + memory'=$M/f-s13-6-16 \
  'v2 + difference + memory'=$M/m-s13 'v2 + difference + memory'=$M/m-s13-6-16
