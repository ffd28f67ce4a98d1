"""Tree and adaptive-grid competitors (AG, quadtree, kd-tree, PrivTree): being written."""
SPECS = ()
