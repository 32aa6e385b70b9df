# payload/: see the header of each file for its contract.
