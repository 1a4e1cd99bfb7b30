"""Board farms on labgrid: places chosen by tags, reserved and locked, flashed through the
place's driver, their consoles read over the place's serial port (docs/farm.md)."""
