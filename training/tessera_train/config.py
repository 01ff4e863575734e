"""Every number the recipe depends on, in one place (the model card repeats them)."""

NAME = "tessera-nodule"
VERSION = "1"
TARGET_SPACING_MM = 1.25
HU_WINDOW = (-1000.0, 400.0)
STRIDE = 2
CROP = 48  # training crop edge, voxels at the target spacing (60 mm)
BATCH = 4
STEPS = 4000
LR = 2e-3
SEED = 20261202

# Phantoms: (seed range, size, spacing mm, nodules, noise HU[, masses]). Held-out seeds never train.
TRAIN_PHANTOMS = [
    (range(100, 116), "320x320x170", "1.1,1.1,2.0", 12, 18.0),
    (range(200, 216), "288x288x256", "1.25,1.25,1.25", 12, 25.0),
    (range(300, 308), "400x400x140", "0.9,0.9,2.5", 12, 12.0),
    (range(400, 408), "256x256x220", "1.4,1.4,1.5", 12, 30.0),
]
HELD_OUT_PHANTOMS = [
    (range(9000, 9012), "384x384x150", "0.9,0.9,2.0", 6, 18.0),
    (range(9100, 9110), "320x320x240", "1.1,1.1,1.4", 6, 25.0),
]
# Second phase (`train --phase masses`): from the first phase's exported model, batch norm
# frozen, on these phantoms with masses of 20-50 mm added to the first phase's data, so that
# the size head learns boxes beyond 30 mm.
TRAIN_MASSES = [
    (range(500, 512), "320x320x200", "1.1,1.1,1.6", 6, 20.0, 2),
]
MASS_STEPS = 1500
MASS_LR = 5e-4
MASS_SHARE = 0.35  # fraction of crops from the mass phantoms
MASS_SEED = 20261205
# Large lesions (masses of 20-50 mm, `tessera phantom --masses`): box size and score measured
# on their own held-out set, so the nodule CPM above stays comparable with earlier cards.
HELD_OUT_MASSES = [
    (range(9500, 9508), "320x320x200", "1.1,1.1,1.6", 4, 18.0, 2),
]
# The coarse pass (pipeline): the same network on a 2.5 mm grid, where a lesion wider than the
# receptive field at 1.25 mm (41 voxels, 51 mm) fits in it; its findings of 20 mm or more (the
# size from which `large.py` counts a lesion as large) join the main pass's candidates.
COARSE_SPACING_MM = 2.5
COARSE_MIN_MM = 20.0
# Validation phantoms (the held-out families, other seeds): the default thresholds are chosen
# on them, so the held-out figures stay untouched by any choice. Never trained on.
VALIDATION_PHANTOMS = [
    (range(9200, 9206), "384x384x150", "0.9,0.9,2.0", 6, 18.0),
    (range(9300, 9306), "320x320x240", "1.1,1.1,1.4", 6, 25.0),
]
# LIDC-IDRI backgrounds: synthetic nodules are inserted; the readers' nodules are left out of
# the loss (neither positive nor negative), so the real-case evaluation sees them first there.
LIDC_CASES = ["LIDC-IDRI-0001", "LIDC-IDRI-0003"]
LIDC_INSERTED = 16
LIDC_SHARE = 0.2  # fraction of training crops drawn from LIDC backgrounds
