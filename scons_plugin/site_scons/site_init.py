# Enables `scons --process-spawner` (spawnpool) for this project; see scons_plugin/README.md.
import spawnpool_scons
spawnpool_scons.enable()
