"""The grid runner: attack x defense x corpus x mode x epsilon cells, resumable and cached."""
