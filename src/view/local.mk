# src/view/: heapprof-view.
